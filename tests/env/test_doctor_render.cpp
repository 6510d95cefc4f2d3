// doctor's two outputs: the JSON object and the text for people.
#include <gtest/gtest.h>

#include "support/doctor_fixtures.h"

namespace hotloop::env {

using test::facts;

TEST(DoctorRender, JsonIsOneObjectWithVerdictAndChecks) {
  const Report r = evaluate(facts("thermal"), {});
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["verdict"], "warn");
  ASSERT_TRUE(j["checks"].is_array());
  ASSERT_EQ(j["checks"].size(), r.checks.size());
  bool saw_fix = false;
  for (const auto& c : j["checks"]) {
    EXPECT_TRUE(
        c.contains("id") && c.contains("status") && c.contains("summary") &&
        c.contains("facts"));
    const std::string status = c["status"];
    EXPECT_TRUE(
        status == "PASS" || status == "WARN" || status == "FAIL" ||
        status == "SKIP")
        << status;
    EXPECT_EQ(c.contains("fix"), status == "WARN" || status == "FAIL")
        << c.dump();
    saw_fix |= c.contains("fix");
  }
  EXPECT_TRUE(saw_fix);
}

TEST(DoctorRender, TextHasOneLinePerCheckAFixUnderEachProblemAndTheVerdict) {
  const Report r = evaluate(facts("busy_memory"), {});
  const std::string text = to_text(r, /*color=*/false);
  EXPECT_NE(text.find("FAIL  gpu0.memory"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: stop those processes"), std::string::npos) << text;
  EXPECT_NE(text.find("verdict: FAIL"), std::string::npos) << text;
  EXPECT_EQ(text.find("\033["), std::string::npos)
      << "no colour codes when color=false";
  EXPECT_NE(to_text(r, /*color=*/true).find("\033[31mFAIL"), std::string::npos);
}

TEST(DoctorRender, VerdictNames) {
  EXPECT_STREQ(to_string(Verdict::CpuOnly), "cpu-only");
  EXPECT_STREQ(to_string(Status::Skip), "SKIP");
}

} // namespace hotloop::env
