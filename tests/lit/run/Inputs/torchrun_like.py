"""Starts ranks the way torchrun's agent does on one host: the agent holds
its own TCP store on MASTER_PORT and tells each worker so with
TORCHELASTIC_USE_AGENT_STORE=True. Prints every rank's output prefixed with
its rank and exits with the first non-zero status.

Usage: torchrun_like.py NPROC -- COMMAND ARGS...
"""
import os
import socket
import subprocess
import sys


def main():
    nproc = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    agent_store = socket.socket()
    agent_store.bind(("127.0.0.1", 0))
    agent_store.listen()
    port = agent_store.getsockname()[1]
    ranks = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_USE_AGENT_STORE="True")
        ranks.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    status = 0
    for rank, process in enumerate(ranks):
        out, _ = process.communicate(timeout=120)
        for line in out.splitlines():
            print("[rank %d] %s" % (rank, line))
        if process.returncode and not status:
            status = process.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
