#pragma once
// The forms `--data` takes, one entry each: parse_data_spec() reads its
// prefixes, and --help, Python's Loader docstring and the docs' tables are
// written from it (tests/data/test_data_spec.cpp checks docs/data.md and
// docs/python.md against it). A new data source is one entry here and its
// opener in open_dataset() (docs/adding-a-data-source.md).

#include <span>
#include <string>

#include "hotloop/data/data_spec.h"

namespace hotloop::data {

struct DataKind {
  DataSpec::Kind kind;
  const char* prefix; // the text before the colon
  const char* form; // as help writes it: "wds:DIR|GLOB"
  const char* yields; // what a sample is, in a few words
  bool tokens; // language-model data (else images)
  bool needs_path; // nothing after the colon is an error
};

std::span<const DataKind> data_kinds();
const DataKind& data_kind(DataSpec::Kind kind);

enum class DataFor { Any, Images, Tokens };
// The forms, comma-separated: "fashion-mnist[:DIR], folder:DIR, ...".
std::string data_forms(DataFor which = DataFor::Any);

} // namespace hotloop::data
