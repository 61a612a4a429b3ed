// A lanesched producer in Node.js: submits --count prompts of one shape and waits for their
// results on reply_to subjects.   node examples/producer.mjs --model llama --count 8 --wait 30
import { parseArgs } from 'node:util';
import { connect } from '../src/index.js'; // or 'lanesched-client' once installed

const { values: a } = parseArgs({
    options: { server: { type: 'string' }, model: { type: 'string', default: 'llama' },
        count: { type: 'string', default: '8' }, wait: { type: 'string', default: '0' } },
});
const client = await connect(a.server ? { servers: a.server } : {});
const system = 'You are a helpful assistant.';
const inbox = client.newInbox();
const results = client.nc.subscribe(`${inbox}.>`);
const run = Date.now();
const items = Array.from({ length: Number(a.count) }, (_, i) => ({
    id: `node-${run}-${i}`,
    tokens: 60 + 10 * i,
    components: [system],
    payload: JSON.stringify({ prompt: `${system}\nQuestion ${i}`, max_tokens: 16 }),
    replyTo: `${inbox}.${i}`,
}));
const r = await client.submit(a.model, items);
for (const x of r.results) console.log(x.id, x.status, x.reason);
console.log(`${r.accepted} accepted, ${r.duplicate} duplicate, ${r.rejected} rejected`);
if (Number(a.wait) > 0) {
    const timer = setTimeout(() => { console.error('not every result came'); process.exit(1); }, Number(a.wait) * 1000);
    let got = 0;
    for await (const m of results) {
        console.log('result', m.subject, m.string());
        if (++got === r.accepted) break;
    }
    clearTimeout(timer);
}
await client.close();
