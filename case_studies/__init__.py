"""Case studies: ImageNet-like and malware-like training, profiled on a slow
shared-file-system tier, staged to /dev/shm as tfdarshan recommends, and run
again. `python -m case_studies --help`."""
