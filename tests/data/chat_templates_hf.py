#!/usr/bin/env python3
"""Real models' chat templates (tests/data/chat_templates/*.jinja: Qwen2.5, Qwen3, Llama 3.1, Llama 3.2,
Mistral v0.3, SmolLM2, Phi-4-mini, Gemma 2, and TRL's Qwen3 training template with {% generation %}) run by
hotloop's interpreter against transformers' apply_chat_template, and what hotloop trains against TRL.

Run by ctest (data.chat_templates_hf) as: chat_templates_hf.py HOTLOOP_BINARY. No download: one byte-level
BPE tokenizer trained here, with every template's special tokens as added tokens, saved once per template
with that template and its model's bos/eos tokens. For each template and each conversation (one turn, a
system message, several turns, prompt-completion, tools, non-ASCII and edge whitespace):
1. the token ids of `hotloop data show --json` equal transformers' (apply_chat_template's text, tokenized
   without special tokens, as apply_chat_template(tokenize=True) does);
2. the trained flags equal TRL's: the assistant masks of return_assistant_tokens_mask for a template with
   generation blocks (in a prompt-completion line, with the completion mask); the completion mask (all
   after the prompt's own rendering with its generation prompt) for prompt-completion lines; else each
   assistant turn (after the conversation before it rendered with a generation prompt, as far as the
   whole agrees with the turn rendered last, from the front or the back: data/tokens/chat_template.h),
   which TRL has no mask for;
3. `hotloop data check` reads every line: the examples and the trained tokens;
4. a conversation the template refuses (raise_exception: Gemma's system role) is refused by hotloop too,
   with the template's message; a prompt-completion line whose prompt, rendered alone, does not start the
   whole conversation (Mistral's template moves the system message to the last user message) is refused,
   where TRL warns and trains a misplaced mask.
Skips (exit 77) with the reason when tokenizers or transformers is missing.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
except ImportError as e:
    print(f"SKIP: {e}; scripts/setup installs tokenizers and transformers")
    sys.exit(77)

HOTLOOP = sys.argv[1]
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_templates")
# Each template's model: its bos and eos tokens (tokenizer_config.json).
MODELS = {
    "qwen2.5": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "qwen3-training": (None, "<|im_end|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral": ("<s>", "</s>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "phi4-mini": ("<|endoftext|>", "<|endoftext|>"),
    "gemma2": ("<bos>", "<eos>"),
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|end_of_text|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<s>", "</s>",
            "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<|system|>", "<|user|>",
            "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>", "<tool_call>", "</tool_call>", "<think>",
            "</think>", "<tool_response>", "</tool_response>"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}},
                   "required": ["city"]}}}]


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


SYSTEM = {"role": "system", "content": "  Answer briefly.\n"}
CONVERSATIONS = [
    {"messages": [user("What is the capital of France?"), assistant("Paris.")]},
    {"messages": [SYSTEM, user("Capital of Japan?"), assistant("Tokyo.")]},
    {"messages": [user("Hi!"), assistant("Hello. How can I help?"), user("Where is Zürich? 東京?"),
                  assistant("  In Switzerland; Tokyo is in Japan. ")]},
    {"messages": [SYSTEM, user("One"), assistant("Two"), user("Three"), assistant("Four")]},
    {"prompt": [user("Name the capital of Peru.")], "completion": [assistant("It is Lima.")]},
    {"prompt": [SYSTEM, user("Name the capital of Chile.")], "completion": [assistant("Santiago.")]},
    {"prompt": [user("Capital of Kenya?"), assistant("Nairobi."), user("And of Ghana?")],
     "completion": [assistant("Accra.")]},
    {"messages": [user("Weather in Oslo?"), assistant("I cannot look that up.")], "tools": TOOLS},
    {"messages": [user("Weather in Oslo?"),
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function", "function": {
                      "name": "get_weather", "arguments": {"city": "Oslo"}}}]},
                  {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"sky\": \"clear\"}"},
                  assistant("Clear skies in Oslo.")], "tools": TOOLS},
]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def tokenizer_object():
    texts = [json.dumps(c, ensure_ascii=False) for c in CONVERSATIONS] * 20
    for name in MODELS:
        with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
            texts.append(f.read())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=600, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=SPECIALS))
    return tok


def write_folder(root, name, tok_object):
    path = os.path.join(root, name)
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
        template = f.read()
    bos, eos = MODELS[name]
    fast = PreTrainedTokenizerFast(tokenizer_object=tok_object, bos_token=bos, eos_token=eos,
                                   chat_template=template)
    fast.save_pretrained(path)
    return path, fast


def messages_of(ex):
    return ex.get("messages") or ex["prompt"] + ex["completion"]


def render(fast, msgs, ex, generation_prompt=False):
    kwargs = {"tools": ex["tools"]} if "tools" in ex else {}
    return fast.apply_chat_template(msgs, tokenize=False, add_generation_prompt=generation_prompt, **kwargs)


def flags_of_spans(fast, text, spans):
    enc = fast(text, add_special_tokens=False, return_offsets_mapping=True)
    return list(enc["input_ids"]), [
        1 if any(s < b and a < e for a, b in spans) else 0 for s, e in enc["offset_mapping"]]


class NotAPrefix(Exception):
    """The prompt rendered alone does not start the whole conversation."""


def reference(fast, ex, generation_blocks):
    """Token ids and trained flags as transformers renders and TRL trains (see the module's doc)."""
    msgs = messages_of(ex)
    kwargs = {"tools": ex["tools"]} if "tools" in ex else {}
    text = render(fast, msgs, ex)
    ids = list(fast(text, add_special_tokens=False)["input_ids"])
    completion = [1] * len(ids)
    if "prompt" in ex:  # TRL's completion mask
        prompt = render(fast, ex["prompt"], ex, True)
        if not text.startswith(prompt):  # TRL warns and trains a misplaced mask; hotloop refuses
            raise NotAPrefix()
        prompt_ids = fast(prompt, add_special_tokens=False)["input_ids"]
        assert ids[:len(prompt_ids)] == list(prompt_ids)
        completion = [0] * len(prompt_ids) + [1] * (len(ids) - len(prompt_ids))
    if generation_blocks:  # TRL's assistant_only_loss (and the completion mask)
        out = fast.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                       **kwargs)
        return list(out["input_ids"]), [a * c for a, c in zip(out["assistant_masks"], completion)]
    if "prompt" in ex:
        return ids, completion
    spans, cursor = [], 0
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        before, turn = render(fast, msgs[:i], ex, True), render(fast, msgs[:i + 1], ex)
        if text.startswith(before) and turn.startswith(before) and len(before) >= cursor:
            start, alone = len(before), turn[len(before):]
        else:
            start, alone = text.index(m["content"], cursor), turn[turn.rindex(m["content"]):]
        rest = text[start:]
        front = len(os.path.commonprefix([rest, alone]))
        back = max((len(alone) - d for d in range(len(alone)) if rest.startswith(alone[d:])), default=0)
        spans.append((start, start + max(front, back)))
        cursor = spans[-1][1]
    return flags_of_spans(fast, text, spans)


def hotloop_show(folder, data_file, index):
    r = subprocess.run([HOTLOOP, "data", "show", "--data", "instruct:" + data_file, "--init", folder,
                        "--index", str(index), "--json"], capture_output=True, text=True, errors="replace")
    return r


def main():
    tok_object = tokenizer_object()
    with tempfile.TemporaryDirectory() as root:
        for name in MODELS:
            folder, fast = write_folder(root, name, tok_object)
            generation_blocks = "{% generation %}" in fast.chat_template or "{%- generation %}" in fast.chat_template
            accepted, refused = [], []
            for ex in CONVERSATIONS:
                try:
                    accepted.append((ex, reference(fast, ex, generation_blocks)))
                except jinja2.exceptions.TemplateError as e:  # the template refuses it (raise_exception)
                    refused.append((ex, str(e)))
                except NotAPrefix:
                    refused.append((ex, "does not start with its prompt as the template renders it alone"))
            data_file = os.path.join(root, name + "_train.jsonl")
            with open(data_file, "w", encoding="utf-8") as f:
                for ex, _ in accepted:
                    f.write(json.dumps(ex, ensure_ascii=False) + "\n")
            for index, (ex, (ids, trained)) in enumerate(accepted):
                r = hotloop_show(folder, data_file, index)
                what = f"{name} #{index} ({', '.join(m['role'] for m in messages_of(ex))}" \
                       f"{', tools' if 'tools' in ex else ''}{', prompt-completion' if 'prompt' in ex else ''})"
                if r.returncode != 0:
                    check(False, f"{what}: hotloop data show exited {r.returncode}: {r.stderr.strip()[-400:]}")
                    continue
                view = json.loads(r.stdout)
                same_ids = view["ids"] == ids
                check(same_ids, f"{what}: the token ids equal transformers' ({len(ids)} tokens)")
                if not same_ids:
                    print("  hotloop:      ", repr(fast.decode(view["ids"])))
                    print("  transformers: ", repr(fast.decode(ids)))
                    continue
                got = [1 if t else 0 for t in view["trained"]]
                check(got == trained, f"{what}: the trained tokens equal TRL's ({sum(trained)} trained)")
                if got != trained:
                    print("  hotloop: ", [fast.decode([i]) for i, t in zip(ids, got) if t])
                    print("  TRL:     ", [fast.decode([i]) for i, t in zip(ids, trained) if t])
            # data check reads every line through the same template.
            r = subprocess.run([HOTLOOP, "data", "check", "--data", "instruct:" + data_file, "--init", folder,
                                "--json"], capture_output=True, text=True, errors="replace")
            summary = json.loads(r.stdout) if r.returncode == 0 else {}
            check(summary.get("examples") == len(accepted) and
                  summary.get("trained_tokens") == sum(sum(t) for _, (_, t) in accepted),
                  f"{name}: data check reads {len(accepted)} examples with their trained tokens "
                  f"({summary.get('examples')} examples, {summary.get('trained_tokens')} trained)")
            for ex, message in refused:
                bad_file = os.path.join(root, name + "_refused_train.jsonl")
                with open(bad_file, "w", encoding="utf-8") as f:
                    f.write(json.dumps(ex, ensure_ascii=False) + "\n")
                r = hotloop_show(folder, bad_file, 0)
                check(r.returncode == 1 and message.strip() in r.stderr,
                      f"{name}: refuses it as the reference does ({message.strip()[:60]!r}), exit {r.returncode}")
            check(len(accepted) >= 4, f"{name}: {len(accepted)} conversations rendered, {len(refused)} refused")
    if failures:
        sys.exit(f"{len(failures)} failures")


if __name__ == "__main__":
    main()
