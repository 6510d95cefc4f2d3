#pragma once
// Each family's entry, made in the family's own file; model/family.cpp
// lists them (hotloop/model/family.h).

#include "hotloop/model/family.h"

namespace hotloop::model {

ModelFamilyEntry image_family(); // model/image/image_family.cpp
ModelFamilyEntry gpt_family(); // model/gpt/gpt_family.cpp
ModelFamilyEntry llama_family(); // model/llama/llama_family.cpp
ModelFamilyEntry hf_folder_family(); // model/lm/hf_checkpoint.cpp
ModelFamilyEntry exported_family(); // model/script/exported_family.cpp

} // namespace hotloop::model
