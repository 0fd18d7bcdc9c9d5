// The mask and index ops of nn/onnx/onnx_ops_select.cpp on hand-made nodes: comparisons and Where
// on host values with broadcasting, Expand, Slice's bounds, Range, ConstantOfShape, and the bound
// on what a graph may make the host compute (a hostile Range or shape is refused, never allocated).
#include <gtest/gtest.h>

#include <limits>

#include "nn/onnx/onnx_op_parts.h"
#include "tests/onnx/node_run.h"

using namespace tandem;
using tandem::nn::onnx::Value;
using tandem::testing::error_of;
using tandem::testing::NodeRun;
namespace d = tandem::nn::onnx::detail;

namespace {

Value ints(std::vector<int64_t> v, Shape s) { return Value::of_ints(std::move(v), std::move(s)); }
Value scalar(int64_t v) { return Value::of_ints({v}, {}); }

}  // namespace

TEST(OnnxSelectOps, ComparisonsAndWhereOnHostValuesBroadcast) {
  // Equal([2, 1] vs [3]) -> [2, 3]: a mask on the host.
  NodeRun eq("Equal", {ints({1, 2}, {2, 1}), ints({1, 2, 3}, {3})});
  const Value m = eq.value(d::op_equal);
  ASSERT_TRUE(m.host);
  EXPECT_EQ(m.shape, (Shape{2, 3}));
  EXPECT_EQ(m.ints, (std::vector<int64_t>{1, 0, 0, 0, 1, 0}));
  NodeRun less("Less", {Value::of(Tensor::from_vector<float>({0.5f, 2.f}, {2})), Value::of(Tensor::full({}, 1.0))});
  EXPECT_EQ(less.value(d::op_less).ints, (std::vector<int64_t>{1, 0}));
  NodeRun no("Not", {m});
  EXPECT_EQ(no.value(d::op_not).ints, (std::vector<int64_t>{0, 1, 1, 1, 0, 1}));
  // Where with host branches stays on the host; with a tensor branch it is tandem's select.
  NodeRun wh("Where", {m, scalar(7), ints({1, 2, 3}, {3})});
  const Value w = wh.value(d::op_where);
  ASSERT_TRUE(w.host);
  EXPECT_EQ(w.ints, (std::vector<int64_t>{7, 2, 3, 1, 7, 3}));
  const float inf = std::numeric_limits<float>::infinity();
  NodeRun wt("Where", {m, Value::of(Tensor::full({}, -inf)), Value::of(Tensor::ones({2, 3}))});
  EXPECT_EQ(wt.run(d::op_where).to_vector<float>(), (std::vector<float>{-inf, 1, 1, 1, -inf, 1}));
}

TEST(OnnxSelectOps, ExpandSliceRangeConstantOfShape) {
  NodeRun ex("Expand", {Value::of(Tensor::from_vector<float>({1.f, 2.f}, {2, 1})), ints({2, 3}, {2})});
  EXPECT_EQ(ex.run(d::op_expand).to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  NodeRun exh("Expand", {ints({4, 5}, {1, 2}), ints({3, 1}, {2})});
  EXPECT_EQ(exh.value(d::op_expand).ints, (std::vector<int64_t>{4, 5, 4, 5, 4, 5}));
  // Slice's bounds as ONNX gives them: negative from the end, clamped, INT64_MAX for "to the end".
  const Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  NodeRun sl("Slice", {Value::of(x), ints({-2}, {1}), ints({std::numeric_limits<int64_t>::max()}, {1}),
                       ints({1}, {1})});
  const Tensor s = sl.run(d::op_slice);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  NodeRun slh("Slice", {ints({10, 11, 12, 13}, {4}), ints({1}, {1}), ints({-1}, {1})});
  EXPECT_EQ(slh.value(d::op_slice).ints, (std::vector<int64_t>{11, 12}));
  NodeRun rg("Range", {scalar(2), scalar(9), scalar(3)});
  EXPECT_EQ(rg.value(d::op_range).ints, (std::vector<int64_t>{2, 5, 8}));
  NodeRun cs("ConstantOfShape", {ints({2, 2}, {2})});
  const Tensor z = cs.run(d::op_constant_of_shape);
  EXPECT_EQ(z.shape(), (Shape{2, 2}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>(4, 0.f)));
}

// Shape arithmetic on host integers is checked: the fuzzer's graph multiplied two shape values past
// int64 (undefined behaviour, then a wrong shape); overflow and integer division by zero now fail
// the node, naming the values.
TEST(OnnxSelectOps, HostIntegerArithmeticRefusesOverflowAndDivisionByZero) {
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  auto op = [](const char* name) { return nn::onnx::find_op(name, 13); };
  NodeRun fine("Mul", {ints({3, -4}, {2}), scalar(5)});
  EXPECT_EQ(fine.value(op("Mul")).ints, (std::vector<int64_t>{15, -20}));
  NodeRun div("Div", {ints({7, -7}, {2}), scalar(2)});
  EXPECT_EQ(div.value(op("Div")).ints, (std::vector<int64_t>{3, -3}));  // toward zero
  const struct {
    const char* op;
    int64_t x, y;
  } refused[] = {{"Mul", 1513490949773197313, -72057594004373505}, {"Mul", big, 2}, {"Add", big, 1},
                 {"Sub", small, 1}, {"Div", 5, 0}, {"Div", small, -1}};
  for (const auto& r : refused) {
    SCOPED_TRACE(r.op);
    NodeRun n(r.op, {scalar(r.x), ints({1, r.y}, {2})});
    const std::string m = error_of(n, op(r.op));
    EXPECT_NE(m.find(std::string("(") + r.op + ", opset 13)"), std::string::npos) << m;
    EXPECT_NE(m.find("have no int64 result"), std::string::npos) << m;
  }
}

TEST(OnnxSelectOps, RefusalsNameTheNode) {
  NodeRun step("Slice", {ints({1, 2, 3}, {3}), ints({0}, {1}), ints({3}, {1}), ints({0}, {1}), ints({2}, {1})});
  EXPECT_NE(error_of(step, d::op_slice).find("node.onnx: node 'n' (Slice, opset 13): steps [2]"), std::string::npos);
  NodeRun zero("Range", {scalar(0), scalar(5), scalar(0)});
  EXPECT_NE(error_of(zero, d::op_range).find("delta is 0"), std::string::npos);
  // A hostile graph: a billion positions, a shape whose product overflows int64; refused, not allocated.
  NodeRun huge("Range", {scalar(0), scalar(int64_t(1) << 40), scalar(1)});
  EXPECT_NE(error_of(huge, d::op_range).find("too long"), std::string::npos);
  // Four values whose int64 arithmetic would overflow (3 * 2^62), and NaN bounds (no count at all).
  NodeRun wide("Range", {scalar(std::numeric_limits<int64_t>::min()), scalar(std::numeric_limits<int64_t>::max()),
                         scalar(int64_t(1) << 62)});
  EXPECT_NE(error_of(wide, d::op_range).find("integer bounds beyond 2^53"), std::string::npos);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto number = [](float v) { return Value::of(Tensor::from_vector<float>({v}, {})); };
  NodeRun not_a_number("Range", {number(nan), number(4), number(1)});
  EXPECT_NE(error_of(not_a_number, d::op_range).find("start, limit or delta is NaN"), std::string::npos);
  NodeRun big("ConstantOfShape", {ints({int64_t(1) << 40, int64_t(1) << 40}, {2})});
  nn::onnx::Attribute& a = big.node.attributes["value"];
  a.kind = nn::onnx::Attribute::Kind::Tensor;
  a.t = Tensor::from_vector<int64_t>({1}, {1});
  EXPECT_NE(error_of(big, d::op_constant_of_shape).find("more values than tandem computes on the host"),
            std::string::npos);
  NodeRun mixed("Where", {scalar(1), Value::of(Tensor::ones({2})), Value::of(Tensor::ones({2}, DType::f64))});
  EXPECT_NE(error_of(mixed, d::op_where).find("X is f32 and Y is f64"), std::string::npos);
}
