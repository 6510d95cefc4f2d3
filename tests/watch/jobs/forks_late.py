"""Starts its worker processes only after a while (as a training script that builds its DataLoader after
loading a model): WAIT seconds of work alone (argv[1], default 2), then 2 workers busy for 3 s."""
import multiprocessing as mp
import sys
import time


def burn(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x = (x * 31 + 7) % 1_000_003


if __name__ == "__main__":
    wait = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    burn(wait)
    workers = [mp.Process(target=burn, args=(3.0,)) for _ in range(2)]
    for w in workers:
        w.start()
    print("workers:", " ".join(str(w.pid) for w in workers), flush=True)
    for w in workers:
        w.join()
