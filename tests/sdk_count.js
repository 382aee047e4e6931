// Counts with the real Node SDK: the job adds {toggle, times}; evaluates the flag that many
// times, prints the last answer, then flushes the SDK's metrics (POST /api/client/metrics).
const { run } = require('./sdk_node');

run('node-count', { metricsInterval: 3600000 }, async (client, job) => {
  let enabled = false;
  for (let i = 0; i < job.times; i += 1) {
    enabled = client.isEnabled(job.toggle);
  }
  await client.flushMetrics();
  await new Promise((resolve) => {
    process.stdout.write(`${JSON.stringify(enabled)}\n`, resolve);
  });
});
