"""The far side of an offload: the SSH/SFTP transport and the worker protocol run on the remote machine."""
