"""tfjob_style.py, except that worker 1 ends its first run with a given exit code.

Every start of every replica appends a line to ``<out>/starts-<type>-<index>.txt``, so a test
can count how often the program ran. With ``--exit-first 1`` worker 1 exits 1 (permanent under
TFJob's ExitCode); with ``--exit-first 137`` it kills itself with SIGKILL (exit 137, retryable).
A later start (its pod recreated) trains normally.
"""

import json
import os
import runpy
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    argv = sys.argv[1:]
    code = 0
    if "--exit-first" in argv:
        i = argv.index("--exit-first")
        code = int(argv[i + 1])
        del argv[i:i + 2]
    out = argv[argv.index("--out") + 1]
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    starts = os.path.join(out, f"starts-{task['type']}-{task['index']}.txt")
    with open(starts, "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
    with open(starts, encoding="utf-8") as fh:
        first = len(fh.readlines()) == 1
    if code and first and task == {"type": "worker", "index": 1}:
        sys.stdout.flush()
        if code == 137:
            os.kill(os.getpid(), signal.SIGKILL)
        sys.exit(code)
    sys.argv = [os.path.join(HERE, "tfjob_style.py"), *argv]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
