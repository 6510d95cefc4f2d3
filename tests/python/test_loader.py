"""hotloop.Loader: the CLI's specs, sharding, exact resume, bad samples, devices and equal work with the
CLI's loader. Each test names the behaviour it pins; tolerances are exact unless stated."""

import json
import subprocess

import pytest
import torch

import hotloop
from conftest import have_fashion_mnist


def batches(loader, n):
    out = []
    for i, b in enumerate(loader):
        out.append(b)
        if i + 1 == n:
            break
    return out


@pytest.mark.skipif(not have_fashion_mnist(), reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_gives_normalized_float_batches_and_labels():
    loader = hotloop.Loader("fashion-mnist", batch_size=32, workers=2)
    assert len(loader) == 60000 // 32
    x, y = next(iter(loader))
    assert x.shape == (32, 1, 28, 28) and x.dtype == torch.float32
    assert y.shape == (32,) and y.dtype == torch.int64
    assert 0 <= int(y.min()) and int(y.max()) < 10
    # Normalized with Fashion-MNIST's mean and std: about zero mean, unit spread.
    assert abs(float(x.mean())) < 0.5 and 0.5 < float(x.std()) < 1.5


def test_synthetic_spec_in_bf16_channels_last():
    loader = hotloop.Loader("synthetic:64x3x32x32", batch_size=16, dtype=torch.bfloat16, channels_last=True)
    x, y = next(iter(loader))
    assert x.dtype == torch.bfloat16 and x.shape == (16, 3, 32, 32)
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert len(loader) == 4


def test_uint8_batches_are_the_normalized_ones_before_normalization(image_folder):
    spec = f"folder:{image_folder}"
    raw = hotloop.Loader(spec, batch_size=8, size=40, seed=2, dtype=torch.uint8)
    norm = hotloop.Loader(spec, batch_size=8, size=40, seed=2)
    (xr, yr), (xn, yn) = next(iter(raw)), next(iter(norm))
    assert xr.dtype == torch.uint8 and torch.equal(yr, yn)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    torch.testing.assert_close((xr.float() / 255 - mean) / std, xn, rtol=0, atol=1e-5)  # float rounding


def test_folder_spec_crops_to_size_and_counts_an_epoch(image_folder):
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=48, workers=2)
    assert len(loader) == 48 // 8
    seen = [b for b in loader]
    assert len(seen) == 6
    assert all(x.shape == (8, 3, 48, 48) for x, _ in seen)
    labels = torch.cat([y for _, y in seen])
    assert sorted(labels.tolist()) == sorted([0] * 16 + [1] * 16 + [2] * 16)  # each sample once
    assert loader.stats()["samples"] == 48
    assert loader.stats()["decode_rate"] > 0


def test_a_dropped_batchs_memory_is_reused(image_folder):
    # A CPU batch is its buffer's memory, reused once nothing holds it; a batch Python has dropped must come
    # free (else every batch is a new allocation, page-faulted afresh: 17% of the loader's CPU on photos).
    # The pool: prefetch 4 + 1 worker + 1 = 6 buffers for 18 batches.
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=64, workers=1)
    ptrs = []
    for _ in range(3):
        for x, _ in loader:
            ptrs.append(x.data_ptr())
    assert len(ptrs) == 18 and len(set(ptrs)) <= 6


def test_val_split_is_in_order_and_keeps_the_last_partial_batch(image_folder):
    loader = hotloop.Loader(f"folder:{image_folder}", split="val", batch_size=5, size=32)
    sizes = [len(y) for _, y in loader]
    assert sum(sizes) == 12 and sizes[-1] == 2
    labels = torch.cat([y for _, y in loader])
    assert labels.tolist() == sorted(labels.tolist())  # in order, not shuffled


def test_wds_spec_reads_shards(wds_shards):
    loader = hotloop.Loader(f"wds:{wds_shards}", batch_size=6, size=32)
    labels = torch.cat([y for _, y in loader])
    assert len(labels) == 24 and set(labels.tolist()) == {0, 1, 2}


def test_text_spec_yields_next_token_windows():
    loader = hotloop.Loader("text:fortunes", batch_size=4, context=32, max_samples=64)
    x, y = next(iter(loader))
    assert x.shape == (4, 32) and y.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # the targets are the inputs shifted by one token


def test_the_docstring_lists_every_data_form_of_the_library():
    for form in hotloop._native.native.data_forms().split(", "):
        assert form in hotloop.Loader.__doc__, form
    assert "instruct:FILE|DIR" in hotloop.Loader.__doc__


def test_text_in_a_model_folders_tokens_is_its_tokenizers_ids(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    text = open("/usr/share/games/fortunes/fortunes", encoding="utf-8", errors="replace").read()[:20000]
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator([text], vocab_size=400, min_frequency=2, show_progress=False)
    folder = tmp_path / "model"
    folder.mkdir()
    bpe.save(str(folder / "tokenizer.json"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    loader = hotloop.Loader(f"text:{corpus}", tokenizer=folder, batch_size=2, context=16, shuffle=False)
    x, _ = next(iter(loader))
    assert x[0].tolist() == bpe.encode(text).ids[:16]
    with pytest.raises(hotloop.UsageError, match="tokenizer"):
        hotloop.Loader(f"instruct:{corpus}")


def test_best_fit_instruction_batches_carry_each_tokens_position(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    lines = [{"prompt": f"Q{i}: what is {i} plus {i}?", "completion": f" {2 * i}" + " and so on" * (i % 4)}
             for i in range(30)]
    text = "\n".join(line["prompt"] + line["completion"] for line in lines)
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator([text], vocab_size=300, min_frequency=2, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    folder = tmp_path / "model"
    folder.mkdir()
    bpe.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    spec = f"instruct:{data}"
    # The default (wrap): the windows as before, no positions.
    assert len(next(iter(hotloop.Loader(spec, tokenizer=folder, batch_size=2, context=32, shuffle=False)))) == 2
    x, y, pos = next(iter(hotloop.Loader(spec, tokenizer=folder, batch_size=4, context=32, shuffle=False,
                                         packing="best-fit")))
    assert pos.shape == x.shape == y.shape
    starts = pos == 0
    assert starts[:, 0].all()
    # Positions count up within an example, and an example's last token predicts nothing.
    assert ((pos[:, 1:] == pos[:, :-1] + 1) | starts[:, 1:]).all()
    assert (y[:, :-1][starts[:, 1:]] == -100).all()
    with pytest.raises(hotloop.UsageError, match="packing"):
        hotloop.Loader(spec, tokenizer=folder, context=32, packing="tight")


def test_instruction_data_takes_the_folders_chat_template_or_the_one_named(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(["Hi there. Hello."], vocab_size=270, min_frequency=2, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    folder = tmp_path / "model"
    folder.mkdir()
    bpe.save(str(folder / "tokenizer.json"))
    # The folder's template puts a marker first: the rows then start with its token.
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "eos_token": "<|endoftext|>",
        "chat_template": "<|endoftext|>{% for m in messages %}{{ m.content }}{% endfor %}"}))
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"},
                                             {"role": "assistant", "content": "Hello."}]}) + "\n")
    eos = bpe.token_to_id("<|endoftext|>")
    x, _ = next(iter(hotloop.Loader(f"instruct:{data}", tokenizer=folder, batch_size=1, context=4,
                                    shuffle=False, packing="none")))
    assert x[0, 0].item() == eos
    x, _ = next(iter(hotloop.Loader(f"instruct:{data}", tokenizer=folder, batch_size=1, context=4,
                                    shuffle=False, packing="none", chat_template="plain")))
    assert x[0, 0].item() != eos  # "User: Hi"
    with pytest.raises(hotloop.UsageError, match="chat template"):
        hotloop.Loader(f"instruct:{data}", tokenizer=folder, context=4, chat_template="jinja")


def test_each_pass_is_the_next_epoch_and_set_epoch_replays_one(image_folder):
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=32, seed=3)
    first = torch.cat([y for _, y in loader])
    second = torch.cat([y for _, y in loader])
    assert not torch.equal(first, second)  # epoch 1 is shuffled differently
    loader.set_epoch(0)
    again = torch.cat([y for _, y in loader])
    assert torch.equal(first, again)


def test_ranks_read_disjoint_shares_that_cover_one_ranks_epoch(image_folder):
    spec = f"folder:{image_folder}"
    one = hotloop.Loader(spec, batch_size=8, size=32, seed=5, augment="none", rank=0, world_size=1)
    r0 = hotloop.Loader(spec, batch_size=4, size=32, seed=5, augment="none", rank=0, world_size=2)
    r1 = hotloop.Loader(spec, batch_size=4, size=32, seed=5, augment="none", rank=1, world_size=2)
    assert len(r0) == len(r1) == len(one)
    for (x, _), (x0, _), (x1, _) in zip(one, r0, r1):
        assert torch.equal(torch.cat([x0, x1]), x)  # each global batch cut in two, in order


def test_rank_and_world_size_come_from_torchruns_environment(image_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=4, size=32)
    assert (loader.rank, loader.world_size) == (1, 3)
    assert len(loader) == 48 // 12


def test_state_dict_resumes_mid_epoch_with_the_same_batches(image_folder):
    spec = f"folder:{image_folder}"
    a = hotloop.Loader(spec, batch_size=8, size=32, seed=7, workers=2)
    a.set_epoch(2)
    it = iter(a)
    for _ in range(2):
        next(it)
    state = a.state_dict()
    assert (state["epoch"], state["next_batch"]) == (2, 2)
    rest = list(it)
    b = hotloop.Loader(spec, batch_size=8, size=32, seed=7, workers=1)
    b.load_state_dict(state)
    resumed = list(b)
    assert len(resumed) == len(rest) == 4
    for (xa, ya), (xb, yb) in zip(rest, resumed):
        assert torch.equal(ya, yb) and torch.equal(xa, xb)  # bit for bit, augmentation included
    assert b.state_dict()["epoch"] == 3 and b.state_dict()["next_batch"] == 0


def test_a_pass_left_early_is_followed_by_the_next_epoch(image_folder):
    spec = f"folder:{image_folder}"
    a = hotloop.Loader(spec, batch_size=8, size=32, seed=7)
    for i, _ in enumerate(a):
        if i == 1:
            break
    assert (a.state_dict()["epoch"], a.state_dict()["next_batch"]) == (0, 2)
    after_break = torch.cat([y for _, y in a])
    b = hotloop.Loader(spec, batch_size=8, size=32, seed=7)
    b.set_epoch(1)
    assert torch.equal(after_break, torch.cat([y for _, y in b]))


def test_set_epoch_of_the_saved_epoch_keeps_a_loaded_position(image_folder):
    spec = f"folder:{image_folder}"
    a = hotloop.Loader(spec, batch_size=8, size=32, seed=7)
    a.set_epoch(3)
    it = iter(a)
    next(it)
    state = a.state_dict()
    rest = torch.cat([y for _, y in it])
    b = hotloop.Loader(spec, batch_size=8, size=32, seed=7)
    b.load_state_dict(state)
    b.set_epoch(3)  # a training loop's own call, at the top of the resumed epoch
    assert torch.equal(torch.cat([y for _, y in b]), rest)


def test_a_state_after_the_last_batch_is_the_next_epochs_start(image_folder):
    a = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=32, seed=7)
    it = iter(a)
    for _ in range(len(a)):
        next(it)  # the last batch taken; the pass has not seen its end yet
    assert (a.state_dict()["epoch"], a.state_dict()["next_batch"]) == (1, 0)


def test_a_state_from_other_options_is_refused_with_the_reason(image_folder):
    a = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=32, seed=7)
    b = hotloop.Loader(f"folder:{image_folder}", batch_size=4, size=32, seed=7)
    with pytest.raises(hotloop.UsageError, match="batch_size 8") as e:
        b.load_state_dict(a.state_dict())
    assert "resume with the loader options" in e.value.hint


def test_a_bad_sample_is_skipped_counted_and_named(folder_with_bad_file, capfd):
    root, bad = folder_with_bad_file
    loader = hotloop.Loader(f"folder:{root}", batch_size=4, size=32, on_bad_sample="skip", train=False)
    n = sum(len(y) for _, y in loader)
    s = loader.stats()
    assert n == 15 and s["bad_samples"] == 1
    assert len(s["bad_sample_names"]) == 1 and str(bad) in s["bad_sample_names"][0]
    assert capfd.readouterr().err == ""  # the package prints nothing: stats() names it


def test_max_image_pixels_makes_larger_images_bad_samples_that_name_the_limit(image_folder):
    from PIL import Image

    files = sorted((image_folder / "train").glob("*/*.jpg"))
    large = [f for f in files if Image.open(f).size[0] * Image.open(f).size[1] > 10000]
    assert 0 < len(large) < len(files)
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=32, train=False, max_image_pixels=10000)
    n = sum(len(y) for _, y in loader)
    s = loader.stats()
    assert n == len(files) - len(large) and s["bad_samples"] == len(large)
    assert "more than the 10000" in s["bad_sample_names"][0]
    with pytest.raises(hotloop.UsageError, match="max image pixels 0"):
        hotloop.Loader(f"folder:{image_folder}", max_image_pixels=0)


def test_a_bad_sample_fails_naming_the_file_when_asked(folder_with_bad_file):
    root, bad = folder_with_bad_file
    loader = hotloop.Loader(f"folder:{root}", batch_size=4, size=32, on_bad_sample="fail", train=False)
    with pytest.raises(hotloop.DataError, match=str(bad)):
        for _ in loader:
            pass


def test_errors_carry_the_clis_message_and_hint(hotloop_bin, tmp_path):
    missing = tmp_path / "nowhere"
    cli = subprocess.run([hotloop_bin, "data", "check", "--data", f"folder:{missing}"], capture_output=True,
                         text=True)
    assert cli.returncode == 1
    with pytest.raises(hotloop.DataError) as e:
        hotloop.Loader(f"folder:{missing}")
    assert f"error: {e.value}" in cli.stderr
    if e.value.hint:
        assert e.value.hint in cli.stderr


def test_bad_arguments_are_usage_errors():
    with pytest.raises(hotloop.UsageError, match="nonsense"):
        hotloop.Loader("nonsense:1")
    with pytest.raises(hotloop.UsageError, match="decode"):
        hotloop.Loader("synthetic:8x3x8x8", batch_size=4, decode="sideways")
    with pytest.raises(ValueError):
        hotloop.Loader("synthetic:8x3x8x8", batch_size=4, dtype=torch.float16)
    with pytest.raises(hotloop.UsageError, match="uint8"):
        hotloop.Loader("synthetic:8x3x8x8", batch_size=4, dtype=torch.uint8, augment_device="gpu")


def test_decode_device_reaches_the_loader(image_folder, monkeypatch):
    # On the CPU the option is refused with the fix; through the stand-in for nvJPEG (a seam for tests,
    # HOTLOOP_FAKE_GPU_DECODE) the batch has the threads' labels and their images within a level.
    spec = f"folder:{image_folder}"
    with pytest.raises(hotloop.UsageError, match="decode-device gpu needs a CUDA device"):
        hotloop.Loader(spec, batch_size=8, size=40, decode_device="gpu")
    monkeypatch.setenv("HOTLOOP_FAKE_GPU_DECODE", "1")
    gpu = hotloop.Loader(spec, batch_size=8, size=40, seed=2, decode="region", decode_device="gpu")
    threads = hotloop.Loader(spec, batch_size=8, size=40, seed=2, decode="region")
    (xg, yg), (xt, yt) = next(iter(gpu)), next(iter(threads))
    assert torch.equal(yg, yt)
    assert float((xg - xt).abs().mean()) <= 1 / 255 / 0.224


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_a_cuda_device_without_cuda_is_an_env_error():
    with pytest.raises(hotloop.EnvError):
        hotloop.Loader("synthetic:8x3x8x8", batch_size=4, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_uint8_bf16_and_channels_last_batches_on_the_gpu(image_folder):
    spec = f"folder:{image_folder}"
    raw = hotloop.Loader(spec, batch_size=8, size=40, seed=2, dtype=torch.uint8, device="cuda")
    cpu_raw = hotloop.Loader(spec, batch_size=8, size=40, seed=2, dtype=torch.uint8)
    (xg, _), (xc, _) = next(iter(raw)), next(iter(cpu_raw))
    assert xg.is_cuda and xg.dtype == torch.uint8 and torch.equal(xg.cpu(), xc)
    bf = hotloop.Loader(spec, batch_size=8, size=40, seed=2, dtype=torch.bfloat16, channels_last=True,
                        device="cuda")
    x, _ = next(iter(bf))
    assert x.is_cuda and x.dtype == torch.bfloat16 and x.is_contiguous(memory_format=torch.channels_last)
    assert x.device.index == torch.cuda.current_device()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_batches_arrive_on_the_gpu_in_order():
    loader = hotloop.Loader("synthetic:256x3x32x32", batch_size=32, device="cuda", resident="off", train=False)
    cpu = hotloop.Loader("synthetic:256x3x32x32", batch_size=32, device="cpu", resident="off", train=False)
    for (xg, yg), (xc, yc) in zip(loader, cpu):
        assert xg.is_cuda and yg.is_cuda
        torch.testing.assert_close(xg.cpu(), xc, rtol=0, atol=1e-6)  # the GPU's normalization: float rounding
        assert torch.equal(yg.cpu(), yc)


def test_batches_equal_the_clis_loader_for_the_same_seed(hotloop_bin, image_folder, tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    out = tmp_path / "batch.safetensors"
    subprocess.run([hotloop_bin, "data", "batch", "--data", f"folder:{image_folder}", "--batch-size", "8",
                    "--seed", "11", "--size", "40", "--index", "3", "--epoch", "1", "--out", str(out)],
                   check=True, capture_output=True)
    cli = safetensors.load_file(str(out))
    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, seed=11, size=40)
    loader.load_state_dict({**loader.state_dict(), "epoch": 1, "next_batch": 3})
    x, y = next(iter(loader))
    assert torch.equal(x, cli["images"]) and torch.equal(y, cli["labels"])


def test_the_gil_is_released_while_the_loader_waits(image_folder):
    import sys
    import threading
    import time

    loader = hotloop.Loader(f"folder:{image_folder}", batch_size=8, size=96, workers=1, prefetch=1)
    ticks = []
    done = threading.Event()

    def spin():  # runs only when the main thread lets go of the GIL
        while not done.is_set():
            ticks.append(1)
            time.sleep(0)

    # No forced switches: the spinner gets the GIL only where the main thread releases it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    t = threading.Thread(target=spin)
    try:
        t.start()
        before = len(ticks)
        for _ in loader:
            pass
        during = len(ticks) - before
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(interval)
    assert during > 0


def test_loader_and_run_resolve_cuda_to_the_same_device(monkeypatch):
    # The seam: the extension module's Loader and Run, replaced by recorders; torch's CUDA queries, by answers.
    import hotloop.loader as loader_module
    import hotloop.run as run_module

    seen = {}

    class Recorder:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def info(self):  # a Run fed by a Loader asks it for the data set's tokenizer files
            return {}

    monkeypatch.setattr(loader_module.native, "Loader", Recorder)
    monkeypatch.setattr(run_module.native, "Run", Recorder)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    current, visible = [0], [4]
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible[0])
    monkeypatch.delenv("LOCAL_RANK", raising=False)

    def both(device="cuda"):
        hotloop.Loader("synthetic:8x3x8x8", batch_size=4, device=device)
        loader_device = seen["device"]
        hotloop.Run("unused", device=device)
        assert seen["device"] == loader_device, "Run and Loader disagree"
        return loader_device

    current[0] = 2
    assert both() == "cuda:2"  # no launcher: the current device, as torch means "cuda"
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert both() == "cuda:2"  # under torchrun with set_device(2): the device the process chose
    current[0] = 0
    assert both() == "cuda:1"  # under torchrun without set_device: this rank's GPU
    monkeypatch.setenv("LOCAL_RANK", "3")
    visible[0] = 1
    assert both() == "cuda:0"  # one visible GPU per process (Slurm, a launcher's CUDA_VISIBLE_DEVICES)
    visible[0] = 4
    assert both() == "cuda:3"
    assert both(torch.device("cuda", 2)) == "cuda:2"  # an index given stands
    assert both("cpu") == "cpu"
    # A Run without a device takes the loader's.
    loader = hotloop.Loader("synthetic:8x3x8x8", batch_size=4, device="cuda")
    hotloop.Run("unused", loader=loader)
    assert seen["device"] == "cuda:3"
