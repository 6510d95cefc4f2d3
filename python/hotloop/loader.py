"""hotloop.Loader: the `hotloop` command's data loader for a PyTorch loop."""

import os

import torch

from ._device import env_int as _env_int
from ._device import resolve_device
from ._native import native

_DTYPES = {torch.float32: torch.float32, torch.bfloat16: torch.bfloat16, torch.uint8: torch.uint8,
           "float32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "uint8": torch.uint8}


class Loader:
    """Batches of `data` as torch tensors, from hotloop's decode threads.

    data: the same specs as `hotloop train --data`: {DATA_FORMS}. Images yield (images, labels); token
      data (tokens:, text:, instruct:) yields (inputs, targets) windows of `context` tokens, and
      instruct: with packing="best-fit" (inputs, targets, positions).
    tokenizer: a Hugging Face model folder whose tokenizer.json encodes text: and instruct: data (what
      `hotloop train --init DIR` gives them); empty: text is bytes, and instruct: needs one.
    split: "train", "val" or "test".
    batch_size: samples per batch on this rank (default 64).
    train: training augmentation (random-resized crop and flip for photos) and shuffling; default: split
      is "train". Otherwise the eval transform (resize, center crop), in order, every sample.
    workers: decode threads (0: one per usable CPU). prefetch: ready batches held ahead (4).
    augment: "default" or "none". augment_device: "cpu" (decode threads) or "gpu" (the batch, on device).
    decode: JPEG photos: "auto" (only the crop's region, at the smallest DCT scale that keeps it at least
      `size`), "region" (the crop's region at full scale: a full decode's pixels) or "full".
    decode_device: "cpu" (the decode threads) or "gpu" (folders' and shards' baseline JPEGs decoded by
      nvJPEG on the CUDA device, their crops resized there; progressive, CMYK and PNG files stay on the CPU).
    size: output height and width (0: the data set's own size, 224 for photos).
    seed: the order and the augmentation are a function of (seed, epoch, position).
    rank, world_size: this process's share of each global batch; default: torchrun's $RANK and
      $WORLD_SIZE (0 and 1 without them).
    on_bad_sample: "skip" (count and name them in stats()) or "fail" (raise hotloop.DataError naming the
      file).
    device: where batches are delivered ("cpu", "cuda", "cuda:1"; "cuda": the current CUDA device once set,
      else under torchrun this rank's, LOCAL_RANK modulo the visible GPUs: hotloop.Run's rule). On a GPU: pinned buffers, an async copy on a side stream the current stream waits
      on, normalization there.
    resident: "auto" (small fixed-size data sets decoded once onto the GPU), "on" or "off".
    mean, std: per channel; default: ImageNet's for 3 channels, Fashion-MNIST's for 1.
    dtype: torch.float32 or torch.bfloat16 (normalized images), or torch.uint8 (as decoded and augmented,
      for a loop that normalizes itself; not with resident mode or augment_device="gpu").
    channels_last: NHWC memory format.
    context: token data: tokens per sample. max_samples: token data: at most this many per epoch (0: all).
    packing: instruct: data: "wrap" (the examples as one stream cut into windows: an example attends to the
      ones before it in its window), "none" (one example a row, padded: what any causal model trains on
      correctly) or "best-fit" (whole examples packed into rows, longest first; each batch also carries the
      (B, T) positions of every token in its example, from 0: a model that restarts its positions there and
      keeps attention inside each example, as transformers' flash-attention-2 models do with position_ids,
      trains as on one example a row, without the padding). `hotloop train` packs best-fit.
    chat_template: instruct: data's chat template, as `hotloop train --chat-template`: "auto" (the
      tokenizer folder's own Jinja template where it has one, else the built-in its added tokens choose),
      "folder", "chatml", "llama3" or "plain".
    max_image_pixels: folders and shards: an image whose header claims more pixels is a bad sample (see
      on_bad_sample), refused before it is allocated; default 2**28 (16384 x 16384), at most 65535 x 65535.

    One pass of `for x, y in loader` is one epoch; the next pass is the next epoch (set_epoch(e) sets it).
    state_dict() / load_state_dict() resume exactly mid-epoch (torchdata StatefulDataLoader's convention).
    Raises hotloop.UsageError for bad arguments, hotloop.DataError for unreadable data (naming the file),
    hotloop.EnvError for a CUDA device without CUDA.
    """

    def __init__(self, data, *, tokenizer="", split="train", batch_size=64, train=None, workers=0, prefetch=4, shuffle=None,
                 drop_last=None, augment="default", augment_device="cpu", decode="auto", decode_device="cpu", size=0, channels=0,
                 seed=0, rank=None, world_size=None, on_bad_sample="skip", resident="auto", device="cpu",
                 mean=None, std=None, dtype=torch.float32, channels_last=False, context=0, max_samples=0,
                 packing="wrap", chat_template="auto", max_image_pixels=None):
        if train is None:
            train = split == "train"
        if dtype not in _DTYPES:
            raise ValueError(f"hotloop.Loader: dtype {dtype!r} is not torch.float32, torch.bfloat16 or torch.uint8")
        rank = _env_int("RANK", 0) if rank is None else rank
        world_size = _env_int("WORLD_SIZE", 1) if world_size is None else world_size
        self.device = resolve_device(device)
        device = str(self.device)
        self._native = native.Loader(
            spec=data, tokenizer="" if tokenizer is None else os.fspath(tokenizer), split=split, batch_size=batch_size, workers=workers, prefetch=prefetch,
            shuffle=train if shuffle is None else shuffle, drop_last=train if drop_last is None else drop_last,
            train=train, augment=augment, augment_device=augment_device, decode=decode, decode_device=decode_device, size=size,
            channels=channels, seed=seed, rank=rank, world_size=world_size, on_bad_sample=on_bad_sample,
            resident=resident, device=device, mean=list(mean or []), std_dev=list(std or []), context=context,
            max_samples=max_samples, packing=packing, chat_template=chat_template,
            max_image_pixels=native.DEFAULT_MAX_IMAGE_PIXELS if max_image_pixels is None else max_image_pixels, dtype=str(_DTYPES[dtype]).replace("torch.", ""),
            channels_last=channels_last)
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size

    def __len__(self):
        """Batches per epoch on this rank."""
        return len(self._native)

    def __iter__(self):
        self._native.start()
        while True:
            batch = self._native.next()
            if batch is None:
                return
            yield batch

    def set_epoch(self, epoch):
        """The epoch the next pass reads (its order and augmentation)."""
        self._native.set_epoch(epoch)

    def state_dict(self):
        """Where the loader is: {"epoch", "next_batch", "seed", "batch_size", "world_size", "rank"}."""
        return self._native.state_dict()

    def load_state_dict(self, state):
        """The next pass continues where `state` was taken: the same batches, bit for bit."""
        self._native.load_state_dict(dict(state))

    def last_wait_seconds(self):
        """How long the latest batch kept its caller waiting."""
        return self._native.last_wait_seconds()

    def stats(self):
        """Since the loader was made: {"batches", "samples"} delivered; "bad_samples" skipped and
        "bad_sample_names" (the first 100: what was wrong, where); "wait_seconds", the time the consumer
        waited for batches; "decode_rate", samples per second of one decode thread's busy time
        ("decoded_samples" in "decode_seconds"; 0 for resident and token data); "buffers_allocated";
        "resident" and "feed_reason", why it feeds as it does (e.g. "decode threads: the images differ
        in size")."""
        return self._native.stats()

    def info(self):
        """The data set: {"size", "classes", "shape", "describe", "tokenizer_files"} (the last: token
        data's tokenizer files, which a Run fed by this loader keeps in its folder)."""
        return self._native.info()

    def __repr__(self):
        return f"hotloop.Loader({self.info()['describe']}, batch_size={self.batch_size}, device={self.device})"


# The --data forms come from the library's one table of them (data/data_kinds.h); python -OO has no
# docstrings.
if Loader.__doc__:
    Loader.__doc__ = Loader.__doc__.replace("{DATA_FORMS}", native.data_forms())
