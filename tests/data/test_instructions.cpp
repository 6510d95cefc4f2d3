// Instruction data: templates, what is trained, packing, splits and bad lines
// (data/instructions.h), on hand-written byte-level tokenizer.json folders.

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hotloop/data/data_spec.h"
#include "hotloop/data/eval_split.h"
#include "hotloop/data/loader.h"
#include "hotloop/data/tokens/instructions.h"
#include "hotloop/errors.h"
#include "support/byte_stand_ins.h"
#include "support/temp_dir.h"

namespace hotloop::data {
namespace {

// A model folder whose tokenizer.json has the 256 bytes (ids 0..255), `added`
// after them, then the tokens `merges` make (pairs of byte stand-ins, "Ġ Y"
// for " Y"); tokenizer_config.json names `eos`; with `bos`, a
// TemplateProcessing post-processor puts it first (Llama 3's).
std::string write_folder(
    const test::TempDir& dir,
    const std::vector<std::string>& added,
    const std::string& eos,
    const std::string& bos = {},
    const std::vector<std::pair<std::string, std::string>>& merges = {}) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[test::stand_in(b)] = b;
  }
  nlohmann::json tokens = nlohmann::json::array();
  int id = 256;
  for (const std::string& t : added) {
    tokens.push_back({{"id", id}, {"content", t}, {"special", true}});
    vocab[t] = id++;
  }
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back(a + " " + b);
    vocab[a + b] = id++;
  }
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"use_regex", true}}},
      {"added_tokens", tokens},
      {"normalizer", nullptr},
      {"post_processor", nullptr}};
  if (!bos.empty()) {
    const int bos_id = vocab[bos].get<int>();
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens",
         {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
  }
  dir.write("model/tokenizer.json", j.dump());
  dir.write(
      "model/tokenizer_config.json",
      nlohmann::json({{"eos_token", eos}}).dump());
  return (dir.path() / "model").string();
}

// The tokens of `s`, as its text, and the text of its trained tokens.
struct Decoded {
  std::string all;
  std::string trained;
};
Decoded decode(InstructionEncoder& e, const TokenSequence& s) {
  Decoded d;
  EXPECT_EQ(s.ids.size(), s.trained.size());
  for (std::size_t i = 0; i < s.ids.size(); ++i) {
    const std::string t = e.tokenizer().decode(s.ids[i]);
    d.all += t;
    if (s.trained[i] != 0) {
      d.trained += t;
    }
  }
  return d;
}

TEST(Instructions, APromptCompletionTrainsTheCompletionAndEos) {
  test::TempDir dir;
  InstructionEncoder e(write_folder(dir, {"<|endoftext|>"}, "<|endoftext|>"));
  EXPECT_EQ(e.chat_template(), ChatTemplate::Plain);
  EXPECT_EQ(e.eos(), 256);
  const TokenSequence s =
      e.encode(R"({"prompt": "2+2=", "completion": "4", "id": 7})");
  EXPECT_EQ(s.ids, (std::vector<std::uint32_t>{'2', '+', '2', '=', '4', 256}));
  EXPECT_EQ(s.trained, (std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1}));
}

TEST(Instructions, ChatMlTrainsEachAssistantAnswerAndItsEndNotTheHeaders) {
  test::TempDir dir;
  InstructionEncoder e(write_folder(
      dir, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, "<|endoftext|>"));
  EXPECT_EQ(e.chat_template(), ChatTemplate::ChatMl);
  const TokenSequence s = e.encode(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "Hi"},
                       {"role": "assistant", "content": "Hello"},
                       {"role": "user", "content": "Bye"},
                       {"role": "assistant", "content": "Ciao"}]})");
  const Decoded d = decode(e, s);
  EXPECT_EQ(
      d.all,
      "<|im_start|>system\nBe brief.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nHello<|im_end|>\n"
      "<|im_start|>user\nBye<|im_end|>\n"
      "<|im_start|>assistant\nCiao<|im_end|>\n");
  EXPECT_EQ(d.trained, "Hello<|im_end|>Ciao<|im_end|>");
  // The special tokens are single ids, not their text's bytes.
  EXPECT_EQ(s.ids.front(), 257u);
}

TEST(Instructions, Llama3PutsTheBeginTokenFirstAndTrainsTheAnswerAndEot) {
  test::TempDir dir;
  InstructionEncoder e(write_folder(
      dir,
      {"<|begin_of_text|>",
       "<|end_of_text|>",
       "<|start_header_id|>",
       "<|end_header_id|>",
       "<|eot_id|>"},
      "<|eot_id|>",
      "<|begin_of_text|>"));
  EXPECT_EQ(e.chat_template(), ChatTemplate::Llama3);
  // TRL's conversational prompt-completion: the completion's messages train.
  const TokenSequence s = e.encode(
      R"({"prompt": [{"role": "user", "content": "Hi"}],
          "completion": [{"role": "assistant", "content": "Yo"}]})");
  EXPECT_EQ(s.ids.front(), 256u); // <|begin_of_text|>, untrained
  EXPECT_EQ(s.trained.front(), 0);
  const Decoded d = decode(e, s);
  EXPECT_EQ(
      d.all,
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nYo<|eot_id|>");
  EXPECT_EQ(d.trained, "Yo<|eot_id|>");
}

TEST(Instructions, PlainTemplateEndsAnswersWithEos) {
  test::TempDir dir;
  // " Yo" is one token, as GPT-2-style pieces carry the space before a
  // word: it is trained though its space is the header's.
  InstructionEncoder e(write_folder(
      dir, {"</s>"}, "</s>", {}, {{"\u0120", "Y"}, {"\u0120Y", "o"}}));
  const TokenSequence s = e.encode(
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})");
  const Decoded d = decode(e, s);
  EXPECT_EQ(d.all, "User: Hi\nAssistant: Yo</s>");
  EXPECT_EQ(d.trained, " Yo</s>");
  EXPECT_EQ(s.ids.size(), 21u); // "User: Hi\nAssistant:" bytes, " Yo", </s>
  // generate --chat's prompt ends before that space.
  const std::vector<std::int32_t> prompt = e.chat_prompt("Hi");
  EXPECT_EQ(prompt.size(), 19u);
  EXPECT_EQ(prompt.back(), ':');
}

TEST(Instructions, ABadLineIsNamedByFileAndLine) {
  test::TempDir dir;
  const std::string folder = write_folder(dir, {"</s>"}, "</s>");
  const std::string good = R"({"prompt": "a", "completion": "b"})";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"prompt\": \"a\"", "not JSON"},
      {R"({"question": "a", "answer": "b"})", "no \"prompt\""},
      {R"({"prompt": "a", "completion": ""})", "empty completion"},
      {R"({"prompt": "a", "completion": 3})", "not both text"},
      {R"({"messages": [{"role": "user", "content": "a"}]})",
       "no assistant message"},
      {R"({"messages": [{"role": "robot", "content": "a"}]})",
       "role \"robot\""},
      {R"({"messages": [{"role": "user"}]})", "is not {\"role\""},
      {"[1, 2]", "not a JSON object"}};
  for (const auto& [line, why] : bad) {
    const std::string file = (dir.path() / "train.jsonl").string();
    dir.write("train.jsonl", good + "\n\n" + line + "\n" + good + "\n");
    try {
      open_instructions(file, Split::Train, folder);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file + ":3: "), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
    }
  }
}

TEST(Instructions, WithoutAModelFolderOrItsEosItSaysWhatIsMissing) {
  test::TempDir dir;
  dir.write("train.jsonl", R"({"prompt": "a", "completion": "b"})");
  const std::string file = (dir.path() / "train.jsonl").string();
  EXPECT_THROW(open_instructions(file, Split::Train, ""), UsageError);
  const std::string folder = write_folder(dir, {"</s>"}, "</s>");
  dir.write("model/tokenizer_config.json", "{}");
  try {
    open_instructions(file, Split::Train, folder);
    FAIL() << "a folder without an EOS was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(
        std::string(e.what()).find("no end-of-sequence token"),
        std::string::npos)
        << e.what();
  }
  // config.json's eos_token_id serves instead.
  dir.write("model/config.json", R"({"eos_token_id": [256, 0]})");
  EXPECT_NO_THROW(open_instructions(file, Split::Train, folder));
  // Every id the configs list ends a generated text (as transformers').
  dir.write("model/generation_config.json", R"({"eos_token_id": [10, 256]})");
  const InstructionEncoder e(folder);
  EXPECT_EQ(e.end_tokens(), (std::vector<std::int32_t>{256, 0, 10}));
}

std::string examples(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) {
    s += nlohmann::json({{"prompt", "question " + std::to_string(i) + "? "},
                         {"completion", "answer " + std::to_string(i)}})
             .dump() +
        "\n";
  }
  return s;
}

TEST(Instructions, AFileKeepsItsLastTenthForValidationOrUsesItsValFile) {
  test::TempDir dir;
  const std::string folder = write_folder(dir, {"</s>"}, "</s>");
  dir.write("d/train.jsonl", examples(0, 30));
  const std::string train = (dir.path() / "d/train.jsonl").string();
  auto count = [&](const std::string& path, Split split) {
    const auto d = open_instructions(path, split, folder);
    return d->describe();
  };
  EXPECT_NE(count(train, Split::Train).find("27 examples"), std::string::npos);
  EXPECT_NE(count(train, Split::Val).find("3 examples"), std::string::npos);
  EXPECT_THROW(open_instructions(train, Split::Test, folder), NoSuchSplit);
  dir.write("d/val.jsonl", examples(0, 5));
  EXPECT_NE(count(train, Split::Train).find("30 examples"), std::string::npos);
  EXPECT_NE(count(train, Split::Val).find("5 examples"), std::string::npos);
  // A folder: by name.
  const std::string d = (dir.path() / "d").string();
  EXPECT_NE(count(d, Split::Val).find("5 examples"), std::string::npos);
  EXPECT_THROW(open_instructions(d, Split::Test, folder), NoSuchSplit);
  // Split names are words of the name: "retrieval" is not "val".
  dir.write("e/retrieval_train.jsonl", examples(0, 30));
  dir.write("e/retrieval_dev.jsonl", examples(0, 4));
  const std::string e = (dir.path() / "e").string();
  EXPECT_NE(count(e, Split::Train).find("30 examples"), std::string::npos);
  EXPECT_NE(count(e, Split::Val).find("4 examples"), std::string::npos);
  dir.write("e/notes.jsonl", examples(0, 2)); // in no split: an error
  EXPECT_THROW(open_instructions(e, Split::Train, folder), DataError);
  dir.write("f/train_val.jsonl", examples(0, 2)); // in two
  try {
    open_instructions((dir.path() / "f").string(), Split::Train, folder);
    ADD_FAILURE() << "a file named for two splits was read";
  } catch (const DataError& err) {
    EXPECT_NE(
        std::string(err.what()).find("names two splits"), std::string::npos)
        << err.what();
  }
  // Fewer than 10 examples: no val split.
  dir.write("small.jsonl", examples(0, 9));
  EXPECT_THROW(
      open_instructions(
          (dir.path() / "small.jsonl").string(), Split::Val, folder),
      NoSuchSplit);
}

// The split a run evaluates on (data/eval_split.h): val, else test, else
// none; a val file that is there but bad is its error, not "no evaluation".
TEST(Instructions, TheEvalSplitIsValElseTestAndABadOneIsItsError) {
  test::TempDir dir;
  const std::string folder = write_folder(dir, {"</s>"}, "</s>");
  DataSpec spec = parse_data_spec("instruct:" + (dir.path() / "d").string());
  spec.tokenizer_folder = folder;
  dir.write("d/train.jsonl", examples(0, 30));
  EXPECT_EQ(open_eval_split(spec, 0), nullptr)
      << "a folder without val or test";
  dir.write("d/test.jsonl", examples(0, 4));
  auto eval = open_eval_split(spec, 0);
  ASSERT_NE(eval, nullptr);
  EXPECT_NE(eval->describe().find("4 examples"), std::string::npos);
  dir.write("d/val.jsonl", examples(0, 5));
  eval = open_eval_split(spec, 0);
  ASSERT_NE(eval, nullptr);
  EXPECT_NE(eval->describe().find("5 examples"), std::string::npos);
  dir.write("d/val.jsonl", examples(0, 2) + "{\"prompt\": \"q\"}\n");
  try {
    open_eval_split(spec, 0);
    ADD_FAILURE() << "a bad val file was passed over";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("val.jsonl:3"), std::string::npos)
        << e.what();
  }
}

TEST(Instructions, PackedWindowsTargetOnlyTheTrainedTokens) {
  test::TempDir dir;
  const std::string folder = write_folder(dir, {"</s>"}, "</s>");
  // Long prompts: some windows hold no answer and are never read.
  std::string lines;
  for (int i = 0; i < 40; ++i) {
    lines +=
        nlohmann::json({{"prompt", std::string(40, 'p')}, {"completion", "ab"}})
            .dump() +
        "\n";
  }
  dir.write("train.jsonl", lines);
  std::shared_ptr<const TokenDataset> data = open_instructions(
      (dir.path() / "train.jsonl").string(), Split::Train, folder);
  ASSERT_TRUE(data->has_context_only_tokens());
  const std::int64_t context = 8;
  // Each example is 43 tokens (40 + "ab" + </s>): 36 x 43 tokens, and the
  // last partial window is read too.
  EXPECT_EQ(data->windows(context), (36u * 43u - 1u + 7u) / 8u);
  const std::vector<std::uint64_t> kept = data->trained_windows(context);
  EXPECT_LT(kept.size(), data->windows(context));
  LoaderOptions o;
  o.batch_size = 4;
  o.context = context;
  o.shuffle = false;
  o.drop_last = false;
  o.packing = Packing::Wrap; // the windows above (best-fit: test_packing.cpp)
  auto loader = make_loader(data, o);
  EXPECT_EQ(loader->batches_per_epoch(), (kept.size() + 3) / 4);
  loader->start_epoch(0);
  std::int64_t trained = 0;
  while (auto b = loader->next()) {
    const at::Tensor t = b->labels;
    const at::Tensor x = b->images;
    for (std::int64_t r = 0; r < t.size(0); ++r) {
      bool any = false;
      for (std::int64_t c = 0; c < context; ++c) {
        const std::int64_t target = t[r][c].item<std::int64_t>();
        if (target == kNoTarget) {
          continue;
        }
        any = true;
        ++trained;
        // A trained target is "a", "b" or </s>, the next input token.
        EXPECT_TRUE(target == 'a' || target == 'b' || target == 256) << target;
        if (c + 1 < context) {
          EXPECT_EQ(target, x[r][c + 1].item<std::int64_t>());
        }
      }
      EXPECT_TRUE(any) << "a window without a trained target was read";
    }
  }
  // Each trained token is a target once, the last example's too.
  EXPECT_EQ(trained, 36 * 3);
}

// `folder`'s tokenizer_config.json with `chat_template` beside its eos.
void add_template(
    const std::string& folder,
    const std::string& eos,
    const std::string& t) {
  std::ofstream(folder + "/tokenizer_config.json")
      << nlohmann::json({{"eos_token", eos}, {"chat_template", t}}).dump();
}

// A ChatML template that adds a default system message, as Qwen2.5's does.
constexpr const char* kQwenLike =
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nBe kind.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

TEST(
    Instructions,
    TheFoldersOwnTemplateRendersTheConversationAndTrainsEachAssistantTurn) {
  test::TempDir dir;
  const std::string folder = write_folder(
      dir, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, "<|endoftext|>");
  add_template(folder, "<|endoftext|>", kQwenLike);
  InstructionEncoder e(folder);
  EXPECT_EQ(e.chat_template(), ChatTemplate::Folder);
  const TokenSequence s = e.encode(
      R"({"messages": [{"role": "user", "content": "Hi"},
                       {"role": "assistant", "content": "Hello"},
                       {"role": "tool", "content": "42"},
                       {"role": "assistant", "content": "Ciao"}]})");
  const Decoded d = decode(e, s);
  EXPECT_EQ(
      d.all,
      "<|im_start|>system\nBe kind.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\nHello<|im_end|>\n"
      "<|im_start|>tool\n42<|im_end|>\n"
      "<|im_start|>assistant\nCiao<|im_end|>\n");
  // A turn: after the generation prompt, through the turn's own end.
  EXPECT_EQ(d.trained, "Hello<|im_end|>\nCiao<|im_end|>\n");
  // generate --chat: the template's generation prompt.
  std::string prompt;
  for (const std::int32_t id : e.chat_prompt("Yo")) {
    prompt += e.tokenizer().decode(id);
  }
  EXPECT_EQ(
      prompt,
      "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nYo<|im_end|>\n<|im_start|>assistant\n");
}

TEST(Instructions, AChatTemplateOptionPicksABuiltInOrInsistsOnTheFolders) {
  test::TempDir dir;
  const std::string folder = write_folder(
      dir, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, "<|endoftext|>");
  add_template(folder, "<|endoftext|>", kQwenLike);
  InstructionEncoder chatml(folder, ChatTemplate::ChatMl);
  EXPECT_EQ(chatml.chat_template(), ChatTemplate::ChatMl);
  EXPECT_EQ(
      decode(
          chatml,
          chatml.encode(
              R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})"))
          .all,
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n");
  EXPECT_THROW(InstructionEncoder(folder, ChatTemplate::Llama3), DataError);
  test::TempDir bare;
  const std::string plain =
      write_folder(bare, {"<|endoftext|>"}, "<|endoftext|>");
  EXPECT_THROW(InstructionEncoder(plain, ChatTemplate::Folder), DataError);
  EXPECT_EQ(parse_chat_template("auto"), std::nullopt);
  EXPECT_EQ(parse_chat_template("folder"), ChatTemplate::Folder);
  EXPECT_THROW(parse_chat_template("jinja"), UsageError);
}

TEST(Instructions, AConversationTheTemplateRefusesIsAnErrorWithItsMessage) {
  test::TempDir dir;
  const std::string folder =
      write_folder(dir, {"<|endoftext|>"}, "<|endoftext|>");
  add_template(
      folder,
      "<|endoftext|>",
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}");
  InstructionEncoder e(folder);
  try {
    e.encode(
        R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]})");
    FAIL() << "no error";
  } catch (const DataError& err) {
    EXPECT_NE(
        std::string(err.what()).find("refuses it: System role not supported"),
        std::string::npos)
        << err.what();
  }
}

TEST(Instructions, ALineOfMoreThan64MiBIsRefusedNamingFileAndLine) {
  test::TempDir dir;
  const std::string folder =
      write_folder(dir, {"<|endoftext|>"}, "<|endoftext|>");
  dir.write(
      "train.jsonl",
      "{\"prompt\": \"a\", \"completion\": \"b\"}\n\"" +
          std::string((std::size_t{64} << 20) + 1, 'x') + "\"\n");
  try {
    open_instructions(
        (dir.path() / "train.jsonl").string(), Split::Train, folder);
    FAIL() << "no error";
  } catch (const DataError& err) {
    EXPECT_NE(
        std::string(err.what())
            .find("train.jsonl:2: a line of more than 64 MiB"),
        std::string::npos)
        << err.what();
  }
}

TEST(Instructions, ALineNestedPastAnyRealOneIsAnErrorNotACrash) {
  test::TempDir dir;
  InstructionEncoder e(write_folder(dir, {"<|endoftext|>"}, "<|endoftext|>"));
  // 100 000 levels: past what nlohmann's recursive parser survives.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    e.encode("{\"messages\": " + deep + "}");
    FAIL() << "no error";
  } catch (const DataError& err) {
    EXPECT_NE(
        std::string(err.what()).find("JSON nested more than 512 levels deep"),
        std::string::npos)
        << err.what();
  }
}

TEST(
    Instructions,
    ATemplateWithAConstructTheInterpreterLacksIsRefusedNamingIt) {
  test::TempDir dir;
  const std::string folder =
      write_folder(dir, {"<|endoftext|>"}, "<|endoftext|>");
  add_template(folder, "<|endoftext|>", "{% include 'base.jinja' %}");
  try {
    InstructionEncoder e(folder);
    FAIL() << "no error";
  } catch (const DataError& err) {
    EXPECT_NE(
        std::string(err.what())
            .find(
                "tokenizer_config.json's chat_template: line 1: '{% include %}'"),
        std::string::npos)
        << err.what();
  }
}

} // namespace
} // namespace hotloop::data
