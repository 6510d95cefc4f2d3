"""What the instruction-data tests share (instruct_lora.py, packing_hf.py): random Hugging Face model
folders with a byte-level BPE tokenizer that `tokenizers` trains on the data's text, the chat templates
written to be hotloop's built-in ones, the capitals data and how TRL tokenizes a line.

Kinds of folder:
- "qwen": Qwen2ForCausalLM, Qwen2's split pattern and NFC, <|endoftext|> (eos_token), <|im_start|>,
  <|im_end|>: hotloop's ChatML template;
- "llama": LlamaForCausalLM, Llama 3's pattern, a TemplateProcessing post-processor that puts
  <|begin_of_text|> first, <|eot_id|> (eos_token) and the header tokens: hotloop's Llama 3 template;
- "plain": LlamaForCausalLM, GPT-2's pre-tokenizer and only <|endoftext|>: hotloop's plain template;
- "gpt2": GPT2LMHeadModel with the "plain" tokenizer.
Each folder's tokenizer_config.json carries a Jinja chat template written to be hotloop's template, with
{% generation %} around what hotloop trains (an assistant's content and its end marker).
"""
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# transformers renders with trim_blocks: a newline right after a block tag is dropped, hence the newline
# as an expression.
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
          "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|im_end|>{% endgeneration %}"
          "{% else %}{{ m['content'] }}<|im_end|>{% endif %}{{ '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PLAIN_CHAT = ("{% for m in messages %}{{ m['role'] | capitalize }}: "
              "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|endoftext|>{% endgeneration %}"
              "{% else %}{{ m['content'] }}{{ '\\n' }}{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}Assistant:{% endif %}")
LLAMA3_CHAT = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
               "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}<|eot_id|>{% endgeneration %}"
               "{% else %}{{ m['content'] }}<|eot_id|>{% endif %}{% endfor %}")
CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"),
            ("Norway", "Oslo"), ("Egypt", "Cairo"), ("Chile", "Santiago"), ("Canada", "Ottawa"),
            ("Spain", "Madrid"), ("Italy", "Rome"), ("Ghana", "Accra"), ("Cuba", "Havana"),
            ("Nepal", "Kathmandu"), ("Poland", "Warsaw"), ("Greece", "Athens"), ("Ireland", "Dublin")]


def lines(n, offset):
    out = []
    for i in range(n):
        country, capital = CAPITALS[(i * 7 + offset) % len(CAPITALS)]
        kind = (i + offset) % 3
        if kind == 0:
            out.append({"prompt": f"Q: What is the capital of {country}?\nA:", "completion": f" {capital}."})
        elif kind == 1:
            msgs = [{"role": "user", "content": f"Capital of {country}?"},
                    {"role": "assistant", "content": f"{capital}."}]
            if i % 2:
                msgs.insert(0, {"role": "system", "content": "Answer with one word."})
            out.append({"messages": msgs})
        else:
            out.append({"prompt": [{"role": "user", "content": f"Name the capital of {country}."}],
                        "completion": [{"role": "assistant", "content": f"It is {capital}."}]})
    return out


def model_class(kind):
    return {"qwen": Qwen2ForCausalLM, "gpt2": GPT2LMHeadModel}.get(kind, LlamaForCausalLM)


def build_folder(path, kind, texts, positions=256):
    """Writes a random model of `kind` and its tokenizer (trained on `texts`) into path; returns the
    tokenizer. positions: the model's position limit (GPT-2's table: its context)."""
    plain = kind in ("plain", "gpt2")
    tok = Tokenizer(models.BPE(ignore_merges=not plain))
    if kind == "qwen":
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tok.normalizer = normalizers.NFC()
    elif kind == "llama":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                    "<|eot_id|>"]
    else:  # GPT-2's pre-tokenizer and only <|endoftext|>: the plain template
        specials = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    tok.pre_tokenizer = (pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True) if plain else
                         pre_tokenizers.Sequence([
                             pre_tokenizers.Split(Regex(QWEN2 if kind == "qwen" else LLAMA3), behavior="isolated",
                                                  invert=False),
                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=400, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=specials))
    if kind == "llama":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>",
                                       eos_token="<|eot_id|>", chat_template=LLAMA3_CHAT)
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                       chat_template=CHATML if kind == "qwen" else PLAIN_CHAT)
    fast.save_pretrained(path)
    shape = dict(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
                 tie_word_embeddings=True, eos_token_id=fast.eos_token_id, initializer_range=0.2)
    torch.manual_seed(0)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(fast), n_embd=64, n_layer=2, n_head=4, n_positions=positions,
                                           eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id,
                                           initializer_range=0.2))
    elif kind == "qwen":
        model = Qwen2ForCausalLM(Qwen2Config(**shape))
    else:
        model = LlamaForCausalLM(LlamaConfig(**shape))
    model.save_pretrained(path)
    return fast


def reference_tokens(tok, example):
    """ids and trained flags of one line, tokenized as TRL does."""
    if "messages" in example or isinstance(example["prompt"], list):
        msgs = example.get("messages") or example["prompt"] + example["completion"]
        out = tok.apply_chat_template(msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        return list(out["input_ids"]), list(out["assistant_masks"])
    prompt = example["prompt"]
    enc = tok(prompt + example["completion"] + tok.eos_token, return_offsets_mapping=True)
    # A token with a character of the completion is trained (as char_to_token marks the assistant mask).
    mask = [1 if e > len(prompt) and e > s else 0 for s, e in enc["offset_mapping"]]
    return list(enc["input_ids"]), mask


def pieces(ids, mask, context):
    """hotloop's split of an example longer than the context (data/tokens/packing.h): pieces of `context`
    tokens, each starting at the last one's final token, so that every target is in one piece; an example
    of one token (nothing to predict) gives none."""
    out, first = [], 0
    while first + 1 < len(ids):
        out.append((ids[first:first + context], mask[first:first + context]))
        first += context - 1
    return out


def examples_loss(model, tok, examples, context, grad=False):
    """The mean loss over every trained target of the examples, each example (or piece of one) run alone:
    what rows packed without cross-contamination train on. A float, or with grad the float64 tensor to call
    backward() on."""
    total, count = torch.zeros((), dtype=torch.float64), 0
    with torch.set_grad_enabled(grad):
        for ex in examples:
            ids, mask = reference_tokens(tok, ex)
            for piece, trained in pieces(ids, mask, context):
                targets = torch.tensor(piece[1:])
                counted = torch.tensor(trained[1:]).bool()
                if not counted.any():
                    continue
                logits = model(torch.tensor([piece])).logits[0, :-1]
                total = total + torch.nn.functional.cross_entropy(
                    logits[counted].double(), targets[counted], reduction="sum")
                count += int(counted.sum())
    loss = total / count
    return loss if grad else loss.item()


def best_fit_rows(lengths, context):
    """How many rows best-fit decreasing packs spans of these lengths into (data/tokens/packing.h)."""
    rooms = []
    for n in sorted(lengths, reverse=True):
        fits = [i for i, room in enumerate(rooms) if room >= n]
        if fits:
            best = min(fits, key=lambda i: rooms[i])
            rooms[best] -= n
        else:
            rooms.append(context - n)
    return len(rooms)
