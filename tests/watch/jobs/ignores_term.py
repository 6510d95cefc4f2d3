"""A job that outlives SIGTERM (and SIGINT): it says "got SIGTERM" (so a test can tell the signal reached it)
and goes on; only SIGKILL ends it. Prints "ready" once the handlers are set."""
import signal
import time


def say_and_go_on(signum, frame):
    print(f"got {signal.Signals(signum).name}", flush=True)


signal.signal(signal.SIGTERM, say_and_go_on)
signal.signal(signal.SIGINT, say_and_go_on)
print("ready", flush=True)
while True:
    time.sleep(0.05)
