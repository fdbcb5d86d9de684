"""A replica that serves its TensorFlow port and, as a worker, reaches its parameter server there.

No TensorFlow: what it checks is the network a TF_CONFIG describes. Every replica listens on its own
port (the one TF_CONFIG gives its task) and answers ``ok`` to whoever connects. A worker then connects
to the first PS by the name TF_CONFIG gives it (the job's headless Service, through the cluster's
DNS), for at most two minutes, writes what it got to ``<out>/<type>-<index>.peer.json``, and ends once
``<out>/network.done`` exists. A PS serves until it is stopped.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time


def serve(port: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(16)
    while True:
        conn, _ = s.accept()
        conn.sendall(b"ok")
        conn.close()


def reach(address: str, timeout_s: float) -> dict:
    host, port = address.rsplit(":", 1)
    deadline, tries = time.monotonic() + timeout_s, 0
    while True:
        tries += 1
        try:
            with socket.create_connection((host, int(port)), timeout=3) as conn:
                return {"peer": address, "got": conn.recv(16).decode(), "tries": tries}
        except OSError as exc:
            if time.monotonic() > deadline:
                return {"peer": address, "error": str(exc), "tries": tries}
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    config = json.loads(os.environ["TF_CONFIG"])
    kind, index = config["task"]["type"], config["task"]["index"]
    port = int(config["cluster"][kind][index].rsplit(":", 1)[1])
    threading.Thread(target=serve, args=(port,), daemon=True).start()
    print(f"{kind}-{index} serving on {port}", flush=True)
    if kind != "worker":
        while True:
            time.sleep(3600)
    result = reach(config["cluster"]["ps"][0], 120)
    print(json.dumps(result), flush=True)
    with open(os.path.join(args.out, f"{kind}-{index}.peer.json"), "w") as fh:
        json.dump(result, fh)
    while not os.path.exists(os.path.join(args.out, "network.done")):
        time.sleep(0.5)
    sys.exit(0 if "got" in result else 1)


if __name__ == "__main__":
    main()
