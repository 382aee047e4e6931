// OpenFeature's Node server SDK with its OFREP provider (npm @openfeature/server-sdk,
// @openfeature/ofrep-provider): the job on stdin is {url, key, checks: [{kind, flag,
// fallback, context}]}; prints each evaluation's details as one JSON line on stdout.
const fs = require('node:fs');
const { OpenFeature } = require('@openfeature/server-sdk');
const { OFREPProvider } = require('@openfeature/ofrep-provider');

const METHODS = {
  boolean: 'getBooleanDetails',
  string: 'getStringDetails',
  number: 'getNumberDetails',
  object: 'getObjectDetails',
};

async function main() {
  const job = JSON.parse(fs.readFileSync(0, 'utf8'));
  const provider = new OFREPProvider({ baseUrl: job.url, headers: { Authorization: job.key } });
  await OpenFeature.setProviderAndWait(provider);
  const client = OpenFeature.getClient('ofrep-test');
  const lines = [];
  for (const check of job.checks) {
    const details = await client[METHODS[check.kind]](check.flag, check.fallback, check.context);
    lines.push(
      JSON.stringify({
        value: details.value,
        reason: details.reason ?? null,
        variant: details.variant ?? null,
        errorCode: details.errorCode ?? null,
      }),
    );
  }
  await OpenFeature.close();
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
