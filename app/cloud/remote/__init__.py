"""The far side of an offload: the SSH/SFTP transport (transport.py) and the agent that runs on the remote
machine (agent.py, started there as `scriba worker`)."""
