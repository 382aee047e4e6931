// Watches flags with the real Node SDK in the mode the job names (`mode`: {type:
// 'streaming'} or {type: 'polling', format: 'delta'}; `refreshInterval`): prints one JSON
// line {toggle: isEnabled} once synchronised and again each time what isEnabled answers
// changes (checked every 10 ms), and a line {mode: 'streaming' | 'polling'} at the start and
// whenever the SDK changes mode, until killed.
const { run } = require('./sdk_node');

const options = (job) => ({
  disableMetrics: true,
  experimentalMode: job.mode,
  ...(job.refreshInterval ? { refreshInterval: job.refreshInterval } : {}),
});

run('node-watch', options, (client, job) => {
  client.on('warn', (message) => process.stderr.write(`SDK warning: ${message}\n`));
  let last = '';
  let mode = '';
  const report = () => {
    const now = client.repository.getMode();
    if (now !== mode) {
      mode = now;
      process.stdout.write(`${JSON.stringify({ mode })}\n`);
    }
    const state = {};
    for (const toggle of job.toggles) state[toggle] = client.isEnabled(toggle);
    const line = JSON.stringify(state);
    if (line !== last) {
      last = line;
      process.stdout.write(`${line}\n`);
    }
  };
  report();
  setInterval(report, 10);
  return new Promise(() => {}); // until killed
});
