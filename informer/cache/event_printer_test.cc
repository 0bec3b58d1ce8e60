#include "informer/cache/event_printer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace informer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ObjectPtr Pod(const std::string& name, const std::string& rv) {
  return ObjectBuilder()
      .SetApiVersion("v1")
      .SetKind("Pod")
      .SetNamespace("default")
      .SetName(name)
      .SetResourceVersion(rv)
      .SetJson(R"({"spec":{"secret":"hunter2"}})")
      .Build();
}

// Captures what the printer writes through a memory stream.
class EventPrinterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = open_memstream(&buf_, &size_);
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
    std::free(buf_);
  }
  std::string Output() {
    std::fflush(out_);
    return std::string(buf_, size_);
  }
  FILE* out_ = nullptr;
  char* buf_ = nullptr;
  size_t size_ = 0;
};

TEST_F(EventPrinterTest, OneLinePerNotificationWithIdentityOnly) {
  EventPrinter printer(out_, "pods");
  printer.OnAdd(Pod("web-1", "10"), /*is_in_initial_list=*/true);
  printer.OnAdd(Pod("web-2", "11"), /*is_in_initial_list=*/false);
  printer.OnUpdate(Pod("web-1", "10"), Pod("web-1", "12"));
  printer.OnUpdate(Pod("web-1", "12"), Pod("web-1", "12"));
  printer.OnDelete(Pod("web-2", "11"), /*final_state_unknown=*/true);
  const std::string out = Output();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 5) << out;
  EXPECT_THAT(out, HasSubstr("ADDED    pods             default/web-1"));
  EXPECT_THAT(out, HasSubstr("(initial list)"));
  EXPECT_THAT(out, HasSubstr("MODIFIED pods             default/web-1"));
  EXPECT_THAT(out, HasSubstr("rv=10->12"));
  EXPECT_THAT(out, HasSubstr("SYNC     pods             default/web-1"));
  EXPECT_THAT(out, HasSubstr("DELETED  pods             default/web-2"));
  EXPECT_THAT(out, HasSubstr("(tombstone: inferred by a relist)"));
  // Never object contents: caches may hold Secrets.
  EXPECT_THAT(out, Not(HasSubstr("hunter2")));
}

TEST_F(EventPrinterTest, NoLabelPrintsTheKeyRightAfterTheType) {
  EventPrinter printer(out_);
  printer.OnAdd(Pod("a", "1"), false);
  EXPECT_THAT(Output(), HasSubstr("ADDED    default/a"));
}

}  // namespace
}  // namespace informer
