// Evaluates flags with the real Node SDK: the job adds {checks: [{toggle, context, variant}]};
// prints one JSON value per check on stdout (isEnabled's boolean, or getVariant's object).
const { run } = require('./sdk_node');

run('node-eval', { disableMetrics: true }, (client, job) => {
  const lines = job.checks.map((check) =>
    JSON.stringify(
      check.variant
        ? client.getVariant(check.toggle, check.context)
        : client.isEnabled(check.toggle, check.context),
    ),
  );
  return new Promise((resolve) => {
    process.stdout.write(`${lines.join('\n')}\n`, resolve);
  });
});
