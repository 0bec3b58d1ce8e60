#include "informer/util/yaml_reader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace informer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

YAML::Node Load(const std::string& text) {
  absl::StatusOr<YAML::Node> root = LoadYaml(text, "f.yaml");
  EXPECT_TRUE(root.ok()) << root.status();
  return root.ok() ? *root : YAML::Node();
}

TEST(LoadYamlTest, SyntaxErrorNamesFileLineAndColumn) {
  absl::StatusOr<YAML::Node> root = LoadYaml("a: 1\nb: [1, 2\n", "f.yaml");
  ASSERT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root.status().message()),
              HasSubstr("f.yaml:3:1: invalid YAML: "));
}

TEST(LoadYamlTest, LimitsAreCheckedBeforeParsing) {
  YamlLimits limits;
  limits.max_bytes = 10;
  absl::StatusOr<YAML::Node> big = LoadYaml("a: 123456789\n", "f", limits);
  EXPECT_THAT(std::string(big.status().message()),
              HasSubstr("f: larger than 10 bytes"));
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  absl::StatusOr<YAML::Node> nested = LoadYaml(deep, "f");
  EXPECT_THAT(std::string(nested.status().message()),
              HasSubstr("f: nested more than 64 levels deep"));
  // Brackets in quotes and comments do not count.
  EXPECT_TRUE(LoadYaml("a: \"" + deep + "\"\n# " + deep + "\n", "f").ok());
}

TEST(LoadYamlTest, EmptyDocumentIsNull) {
  absl::StatusOr<YAML::Node> root = LoadYaml("", "f");
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->IsNull());
}

TEST(YamlReaderTest, ReadsTypedFields) {
  const YAML::Node root =
      Load("name: x\nflag: yes\nmap: {k: v}\nlist: [a, b]\none: c\n");
  YamlReader r("f.yaml");
  std::string name;
  bool present = false, flag = false;
  YAML::Node map, list, absent;
  std::vector<std::string> strings, single;
  EXPECT_TRUE(r.String(root, "name", "", &name, &present));
  EXPECT_TRUE(r.Bool(root, "flag", "", &flag));
  EXPECT_TRUE(r.Map(root, "map", "", &map));
  EXPECT_TRUE(r.Sequence(root, "list", "", &list));
  EXPECT_TRUE(r.Map(root, "nope", "", &absent));
  EXPECT_TRUE(r.StringList(root, "list", "", &strings));
  EXPECT_TRUE(r.StringList(root, "one", "", &single));
  EXPECT_TRUE(r.KnownKeys(root, "", {"name", "flag", "map", "list", "one"}));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(name, "x");
  EXPECT_TRUE(present);
  EXPECT_TRUE(flag);
  EXPECT_EQ(map["k"].Scalar(), "v");
  EXPECT_EQ(list.size(), 2u);
  EXPECT_FALSE(absent.IsDefined());
  EXPECT_THAT(strings, ElementsAre("a", "b"));
  EXPECT_THAT(single, ElementsAre("c"));
}

TEST(YamlReaderTest, AbsentLeavesTheOutputAlone) {
  const YAML::Node root = Load("other: 1\n");
  YamlReader r("f.yaml");
  std::string s = "kept";
  bool present = true, b = true;
  EXPECT_TRUE(r.String(root, "s", "", &s, &present));
  EXPECT_TRUE(r.Bool(root, "b", "", &b));
  EXPECT_EQ(s, "kept");
  EXPECT_FALSE(present);
  EXPECT_TRUE(b);
  EXPECT_TRUE(r.ok());
}

TEST(YamlReaderTest, ErrorsNameFileLineColumnAndKey) {
  struct Case {
    std::string yaml;
    std::string want;
  } cases[] = {
      {"top:\n  name: [1]\n", "f.yaml:2:9: top.name: expected a string"},
      {"top:\n  flag: maybe\n", "f.yaml:2:9: top.flag: expected true or false"},
      {"top:\n  map: [1]\n", "f.yaml:2:8: top.map: expected a mapping"},
      {"top:\n  list: 3\n", "f.yaml:2:9: top.list: expected a list"},
      {"top:\n  strs: [a, [b]]\n",
       "f.yaml:2:13: top.strs[1]: expected a string"},
      {"top:\n  strs: [a, ' ']\n", "f.yaml:2:9: top.strs: empty entry"},
      {"top:\n  strs: {a: b}\n",
       "f.yaml:2:9: top.strs: expected a list of strings"},
      {"top:\n  typo: 1\n",
       "f.yaml:2:3: top.typo: unknown field (known: name, flag, map, list, "
       "strs)"},
  };
  for (const Case& c : cases) {
    const YAML::Node root = Load(c.yaml);
    const YAML::Node top = root["top"];
    YamlReader r("f.yaml");
    std::string s;
    bool b = false;
    YAML::Node n;
    std::vector<std::string> v;
    const bool ok =
        r.KnownKeys(top, "top", {"name", "flag", "map", "list", "strs"}) &&
        r.String(top, "name", "top", &s) && r.Bool(top, "flag", "top", &b) &&
        r.Map(top, "map", "top", &n) && r.Sequence(top, "list", "top", &n) &&
        r.StringList(top, "strs", "top", &v);
    EXPECT_FALSE(ok) << c.yaml;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(r.status().message()), c.want) << c.yaml;
  }
}

TEST(YamlReaderTest, FirstErrorIsKept) {
  const YAML::Node root = Load("a: [1]\nb: [2]\n");
  YamlReader r("f.yaml");
  std::string s;
  EXPECT_FALSE(r.String(root, "a", "", &s));
  EXPECT_FALSE(r.String(root, "b", "", &s));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.yaml:1:4: a:"));
}

TEST(YamlReaderTest, NullIsAbsentOrAWrongTypeAsAsked) {
  const YAML::Node root = Load("s:\nb: ~\nm:\n");
  YamlReader lenient("f.yaml", YamlReader::NullIs::kAbsent);
  std::string s = "kept";
  bool present = true, b = false;
  YAML::Node m;
  EXPECT_TRUE(lenient.String(root, "s", "", &s, &present));
  EXPECT_TRUE(lenient.Bool(root, "b", "", &b));
  EXPECT_TRUE(lenient.Map(root, "m", "", &m));
  EXPECT_EQ(s, "kept");
  EXPECT_FALSE(present);
  EXPECT_FALSE(m.IsDefined());

  YamlReader strict("f.yaml", YamlReader::NullIs::kWrongType);
  EXPECT_FALSE(strict.String(root, "s", "", &s));
  // yaml-cpp places an empty value where the next token starts.
  EXPECT_THAT(std::string(strict.status().message()),
              HasSubstr(": s: expected a string"));
  YamlReader strict_bool("f.yaml", YamlReader::NullIs::kWrongType);
  EXPECT_FALSE(strict_bool.Bool(root, "b", "", &b));
  YamlReader strict_map("f.yaml", YamlReader::NullIs::kWrongType);
  EXPECT_FALSE(strict_map.Map(root, "m", "", &m));
}

TEST(YamlReaderTest, NonMappingParentReadsAsAbsent) {
  const YAML::Node root = Load("just a scalar\n");
  YamlReader r("f.yaml");
  std::string s;
  EXPECT_TRUE(r.String(root, "a", "", &s));
  EXPECT_TRUE(r.ok());
}

}  // namespace
}  // namespace informer
