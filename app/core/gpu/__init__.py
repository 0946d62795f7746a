"""The GPU as seen from outside the engine: live statistics through NVML, and the CUDA libraries loaded by path."""
