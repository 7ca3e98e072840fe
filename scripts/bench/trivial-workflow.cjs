// The trivial workflow of the order-creation baseline: started like an order's workflow, returns at once.
exports.benchTrivialWorkflow = async function benchTrivialWorkflow() {
  return 'done';
};
