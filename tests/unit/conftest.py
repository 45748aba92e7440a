"""The unit tests under the mutation tester (docs/mutation.md): mutmut runs them once, then forks a process per
mutant; a torch thread pool started before the fork hangs the child on its lock in its first parallel operation (a
timeout mutmut would count as a kill). Under mutmut (it sets MUTANT_UNDER_TEST) torch runs on one thread from the
start, so no pool exists to inherit."""
import os

if "MUTANT_UNDER_TEST" in os.environ:
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
