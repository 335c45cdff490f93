//===- LogicalRulesTest.cpp - Tests for logical axis rules ----------------===//

#include "sd/Sharding/LogicalRules.h"

#include "ShardingTestUtils.h"
#include "gtest/gtest.h"

#include <string>

using namespace sd;

namespace {

using Axes = std::vector<std::vector<std::string>>;

const std::string kRulesDir = SD_TEST_RULES_DIR;

template <typename T>
::testing::AssertionResult failsWith(const absl::StatusOr<T> &result,
                                     const std::string &expected) {
  if (result.ok())
    return ::testing::AssertionFailure() << "succeeded, expected an error";
  return isInvalidArgumentWith(result.status(), expected);
}

LogicalAxisRules preset(std::string_view name) {
  absl::StatusOr<LogicalAxisRules> rules = presetRules(name);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *rules : LogicalAxisRules();
}

MeshSpec mesh(std::string_view spec) {
  absl::StatusOr<MeshSpec> parsed = parseMesh(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : MeshSpec();
}

/// resolve() for tests whose shapes always divide.
Axes resolveOk(const LogicalAxisRules &rules, const MeshSpec &m,
               const std::vector<std::string> &names) {
  absl::StatusOr<Axes> axes =
      rules.resolve(m, "t", names, std::vector<int64_t>(names.size(), 1680));
  EXPECT_TRUE(axes.ok()) << axes.status();
  return axes.ok() ? *axes : Axes();
}

TEST(LogicalRulesTest, PresetNames) {
  EXPECT_EQ(presetRuleNames(),
            (std::vector<std::string>{"dit", "sdxl", "flux", "wan"}));
  EXPECT_TRUE(failsWith(presetRules("x"),
                        "unknown logical axis rules preset \"x\"; expected "
                        "one of dit, sdxl, flux, wan"));
  EXPECT_EQ(preset("dit"), preset("flux"));
  EXPECT_EQ(preset("wan").name, "wan");
}

TEST(LogicalRulesTest, PresetsMatchMaxDiffusionConfigs) {
  const std::pair<const char *, const char *> pairs[] = {
      {"sdxl", "base_xl.yml"},
      {"flux", "base_flux_dev.yml"},
      {"wan", "base_wan_14b.yml"},
      {"sdxl", "base_2_base.yml"}};
  for (const auto &[name, file] : pairs) {
    absl::StatusOr<LogicalAxisRules> fromFile =
        loadRules(kRulesDir + "/" + file);
    ASSERT_TRUE(fromFile.ok()) << fromFile.status();
    EXPECT_EQ(fromFile->rules, preset(name).rules) << file;
    EXPECT_EQ(fromFile->name, kRulesDir + "/" + file);
  }
  // A detail the table in REFERENCE.md leaves out.
  EXPECT_EQ(preset("wan").rules[3],
            (LogicalAxisRule{"activation_cross_attn_q_length",
                             {"context", "tensor"}}));
}

TEST(LogicalRulesTest, LoadsPresetByName) {
  absl::StatusOr<LogicalAxisRules> rules = loadRules("wan");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(*rules, preset("wan"));
  EXPECT_TRUE(
      failsWith(loadRules("dti"), "unknown logical axis rules preset \"dti\""));
}

TEST(LogicalRulesTest, ResolvesWanWeights) {
  LogicalAxisRules wan = preset("wan");
  MeshSpec full = mesh("data:2,fsdp:2,context:2,tensor:2");
  EXPECT_EQ(resolveOk(wan, full, {"embed", "mlp"}),
            (Axes{{"context", "fsdp"}, {"tensor"}}));
  // A mesh without context drops it from the rule.
  EXPECT_EQ(resolveOk(wan, mesh("data:2,fsdp:4"), {"embed", "mlp"}),
            (Axes{{"fsdp"}, {}}));
  EXPECT_EQ(resolveOk(wan, full, {"mlp"}), (Axes{{"tensor"}}));
}

TEST(LogicalRulesTest, UsesEachMeshAxisOnce) {
  LogicalAxisRules wan = preset("wan");
  MeshSpec full = mesh("data:2,fsdp:2,context:2,tensor:2");
  EXPECT_EQ(resolveOk(wan, full, {"activation_batch", "activation_length"}),
            (Axes{{"data", "fsdp"}, {"context"}}));
  // embed wants context,fsdp, both already taken: replicated.
  EXPECT_EQ(
      resolveOk(wan, full, {"activation_batch", "activation_length", "embed"}),
      (Axes{{"data", "fsdp"}, {"context"}, {}}));
  // An axis the mesh lacks still counts as taken, as a size-1 axis would in
  // MaxDiffusion: embed gets nothing although fsdp alone is free.
  EXPECT_EQ(
      resolveOk(wan, mesh("fsdp:4,tensor:2"), {"activation_length", "embed"}),
      (Axes{{}, {}}));
}

TEST(LogicalRulesTest, RuleOrderIsPriority) {
  // The example of flax's logical_to_mesh_axes docstring.
  LogicalAxisRules rules;
  rules.rules = {{"batch", {"X"}},
                 {"features", {"X"}},
                 {"heads", {"Y"}},
                 {"batch", {"Z"}}};
  MeshSpec m = mesh("X:2,Y:2,Z:2");
  EXPECT_EQ(resolveOk(rules, m, {"batch", "length", "heads", "features"}),
            (Axes{{"X"}, {}, {"Y"}, {}}));
  // The earlier rule wins even for a later dimension.
  EXPECT_EQ(resolveOk(rules, m, {"features", "batch"}), (Axes{{}, {"X"}}));
}

TEST(LogicalRulesTest, FallsBackToLaterRuleForSameName) {
  LogicalAxisRules rules;
  rules.rules = {{"features", {"X"}}, {"batch", {"X"}}, {"batch", {"Z"}}};
  MeshSpec m = mesh("X:2,Z:2");
  EXPECT_EQ(resolveOk(rules, m, {"features", "batch"}), (Axes{{"X"}, {"Z"}}));
  EXPECT_EQ(resolveOk(rules, m, {"batch"}), (Axes{{"X"}}));
}

TEST(LogicalRulesTest, ReplicatesUnknownNamesAndNullRules) {
  LogicalAxisRules rules;
  rules.rules = {{"embed", {}}, {"embed", {"fsdp"}}, {"heads", {"tensor"}}};
  MeshSpec m = mesh("fsdp:2,tensor:2");
  // A null rule matches, so the later embed rule never applies.
  EXPECT_EQ(resolveOk(rules, m, {"embed", "", "no_rule", "heads"}),
            (Axes{{}, {}, {}, {"tensor"}}));
}

// A dimension its axes do not divide keeps them (it is padded): Wan2.1's
// 40 heads over tensor:3, a batch of 8 over data:2 × fsdp:3.
TEST(LogicalRulesTest, KeepsAxesThatDoNotDivide) {
  LogicalAxisRules wan = preset("wan");
  absl::StatusOr<Axes> axes =
      wan.resolve(mesh("tensor:3"), "blocks.0.attn.q.weight",
                  {"embed", "heads"}, {5120, 40});
  ASSERT_TRUE(axes.ok()) << axes.status();
  EXPECT_EQ(*axes, (Axes{{}, {"tensor"}}));
  axes = wan.resolve(mesh("data:2,fsdp:3"), "x", {"activation_batch"}, {8});
  ASSERT_TRUE(axes.ok()) << axes.status();
  EXPECT_EQ(*axes, (Axes{{"data", "fsdp"}}));
  // Dynamic sizes too.
  axes = wan.resolve(mesh("tensor:3"), "q", {"embed", "heads"}, {5120, -1});
  ASSERT_TRUE(axes.ok()) << axes.status();
  EXPECT_EQ(*axes, (Axes{{}, {"tensor"}}));
}

TEST(LogicalRulesTest, RejectsBadTensorDescriptions) {
  LogicalAxisRules wan = preset("wan");
  EXPECT_TRUE(failsWith(wan.resolve(mesh("tensor:2"), "w", {"embed"}, {4, 4}),
                        "tensor \"w\" has 1 logical names but rank 2"));
  EXPECT_TRUE(failsWith(
      wan.resolve(mesh("tensor:2"), "w", {"embed", "mlp", "embed"}, {4, 4, 4}),
      "tensor \"w\" has logical name \"embed\" on dimensions 0 and 2"));
}

TEST(LogicalRulesTest, ReadsHandWrittenFile) {
  absl::StatusOr<LogicalAxisRules> rules = loadRules(kRulesDir + "/custom.yml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  std::vector<LogicalAxisRule> expected = {{"batch", {"data", "fsdp"}},
                                           {"embed", {"fsdp"}},
                                           {"embed", {}},
                                           {"norm", {}},
                                           {"mlp", {}},
                                           {"heads", {"tensor"}}};
  EXPECT_EQ(rules->rules, expected);
}

TEST(LogicalRulesTest, ReportsMalformedFiles) {
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/bad_rule_shape.yml"),
                        "bad_rule_shape.yml:3: rule must be [logical_name, "
                        "mesh_axes]"));
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/bad_mesh_axes.yml"),
                        "bad_mesh_axes.yml:3: mesh axes of \"embed\" must be "
                        "a name, a list of names or null"));
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/no_key.yml"),
                        "no_key.yml: no logical_axis_rules key"));
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/not_a_list.yml"),
                        "not_a_list.yml:1: logical_axis_rules must be a list"));
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/syntax_error.yml"),
                        "syntax_error.yml:3: could not find closing ]"));
  EXPECT_TRUE(failsWith(loadRules(kRulesDir + "/missing.yml"),
                        "cannot read rules file \"" + kRulesDir +
                            "/missing.yml\": No such file or directory"));
}

TEST(LogicalRulesTest, ReportsRuleShapeErrors) {
  const char *bad[] = {"[]",          "[batch]",       "[batch, data, x]",
                       "[[a], data]", "[null, data]",  "['', data]",
                       "batch",       "{batch: data}", "[~, ~]"};
  for (const char *rule : bad) {
    std::string text = "seed: 0\nlogical_axis_rules:\n  - [embed, fsdp]\n  - " +
                       std::string(rule) + "\n";
    EXPECT_TRUE(failsWith(parseRulesYaml(text, "rules.yml"),
                          "rules.yml:4: rule must be [logical_name, "
                          "mesh_axes]"))
        << rule;
  }
}

TEST(LogicalRulesTest, ReportsMeshAxesErrors) {
  EXPECT_TRUE(failsWith(
      parseRulesYaml("logical_axis_rules: [[embed, [fsdp, [x]]]]", "r.yml"),
      "r.yml:1: mesh axes of \"embed\" must be a name, a list of names or "
      "null"));
  EXPECT_TRUE(failsWith(
      parseRulesYaml("logical_axis_rules: [[embed, [fsdp, null]]]", "r.yml"),
      "mesh axes of \"embed\""));
  EXPECT_TRUE(
      failsWith(parseRulesYaml("logical_axis_rules: [[embed, '']]", "r.yml"),
                "mesh axes of \"embed\""));
  EXPECT_TRUE(failsWith(
      parseRulesYaml("logical_axis_rules:\n - [embed, [fsdp, fsdp]]", "r.yml"),
      "r.yml:2: mesh axis \"fsdp\" appears twice in the rule for \"embed\""));
}

TEST(LogicalRulesTest, ReportsDocumentErrors) {
  EXPECT_TRUE(failsWith(parseRulesYaml("", "rules.yml"),
                        "rules.yml: no logical_axis_rules key"));
  EXPECT_TRUE(failsWith(parseRulesYaml("- [embed, fsdp]\n", "rules.yml"),
                        "rules.yml:1: expected a mapping at the top level"));
  EXPECT_TRUE(failsWith(parseRulesYaml("a: 1\nlogical_axis_rules:\n", "r.yml"),
                        "logical_axis_rules must be a list"));
  EXPECT_TRUE(failsWith(parseRulesYaml("logical_axis_rules: []\n"
                                       "logical_axis_rules: []\n",
                                       "r.yml"),
                        "r.yml:2: duplicate logical_axis_rules key"));
  // Syntax errors carry llvm::yaml's own message and the line.
  absl::StatusOr<LogicalAxisRules> rules = parseRulesYaml(
      "logical_axis_rules: [[embed, fsdp]]\nx: [1, 2\ny: 3\n", "rules.yml");
  EXPECT_TRUE(failsWith(rules, "rules.yml:3: could not find closing ]"));
  EXPECT_TRUE(failsWith(parseRulesYaml("a: 'unterminated\n", "q.yml"),
                        "q.yml:1: expected quote at end of scalar"));
}

TEST(LogicalRulesTest, AcceptsEmptyRuleList) {
  absl::StatusOr<LogicalAxisRules> rules =
      parseRulesYaml("logical_axis_rules: []\n", "r.yml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_TRUE(rules->rules.empty());
  EXPECT_EQ(rules->name, "r.yml");
}

TEST(LogicalRulesTest, VariantMovesSequenceToFsdp) {
  LogicalAxisRules seq =
      applyRuleVariant(preset("dit"), RuleVariant::FsdpSequence);
  EXPECT_EQ(seq.name, "dit+fsdp-seq");
  MeshSpec m = mesh("data:2,fsdp:2,context:2");
  // The batch leaves fsdp; the sequence takes it, before context.
  EXPECT_EQ(
      resolveOk(seq, m,
                {"activation_batch", "activation_length", "activation_embed"}),
      (Axes{{"data"}, {"fsdp", "context"}, {}}));
  EXPECT_EQ(
      resolveOk(preset("dit"), m,
                {"activation_batch", "activation_length", "activation_embed"}),
      (Axes{{"data", "fsdp"}, {"context"}, {}}));
  // Weights are untouched.
  EXPECT_EQ(resolveOk(seq, m, {"embed", "mlp"}), (Axes{{"fsdp"}, {}}));
  // Rules without a sequence rule get one of their own, first.
  LogicalAxisRules sdxl =
      applyRuleVariant(preset("sdxl"), RuleVariant::FsdpSequence);
  EXPECT_EQ(sdxl.rules.front(),
            (LogicalAxisRule{"activation_length", {"fsdp"}}));
}

TEST(LogicalRulesTest, VariantSplitsEmbedOverContext) {
  LogicalAxisRules embed =
      applyRuleVariant(preset("dit"), RuleVariant::ContextEmbed);
  MeshSpec m = mesh("fsdp:2,context:2,tensor:2");
  EXPECT_EQ(resolveOk(embed, m, {"embed", "mlp"}),
            (Axes{{"context", "fsdp"}, {"tensor"}}));
  // Wan's rules already do.
  EXPECT_EQ(applyRuleVariant(preset("wan"), RuleVariant::ContextEmbed),
            preset("wan"));
}

TEST(LogicalRulesTest, LoadsVariantsByName) {
  absl::StatusOr<LogicalAxisRules> both = loadRules("dit+fsdp-seq+ctx-embed");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->name, "dit+fsdp-seq+ctx-embed");
  EXPECT_EQ(*both, applyRuleVariant(applyRuleVariant(preset("dit"),
                                                     RuleVariant::FsdpSequence),
                                    RuleVariant::ContextEmbed));
  EXPECT_TRUE(failsWith(loadRules("dti+fsdp-seq"),
                        "unknown logical axis rules preset \"dti\""));
  EXPECT_TRUE(failsWith(loadRules("dit+seq"), "dit+seq"));
}

} // namespace
