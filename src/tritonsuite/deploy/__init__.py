"""Deploy: a model spec becomes a served deployment. ``formats/`` exports and verifies artifacts (TorchScript trace
and script, ONNX, TensorRT plan), ``export`` caches them, ``repository`` writes the stock model repository
(``config.pbtxt`` + ``1/model.<ext>``), and ``backends/`` names each stock platform and holds the python-based
stand-ins the embedded server loads in their place."""
