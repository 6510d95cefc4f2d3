"""A job that ignores SIGTERM (and SIGINT): only SIGKILL ends it. Prints "ready" once the handlers are set."""
import signal
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
