"""tritonsuite: export, deploy, check and measure models on NVIDIA Triton Inference Server."""

__version__ = "0.1.0"
