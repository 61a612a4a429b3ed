// peer.mjs - the interoperability matrix's Node peer (README.md beside it says what every peer
// does; the C, Python and Go peers do the same).
import { parseArgs } from 'node:util';
import { connect, shapeSign } from '../../clients/node/src/index.js';

const SHAPES = { A: 'interop system prompt A', B: 'interop system prompt B' };
const { values: a, positionals } = parseArgs({
    allowPositionals: true,
    options: {
        server: { type: 'string' },
        models: { type: 'string' },
        count: { type: 'string', default: '25' },
        seed: { type: 'string', default: '1' },
        'timeout-s': { type: 'string', default: '60' },
    },
});
const count = Number(a.count);
const seed = Number(a.seed);
const models = a.models.split(',');
const client = await connect({ servers: a.server });
const out = {};

if (positionals[0] === 'produce') {
    for (const model of models) {
        const items = [];
        let tokens = 0;
        for (let i = 0; i < count; i++) {
            const letter = 'AB'[i % 2];
            const t = 1 + ((i * 37 + seed) % 300);
            const id = `${model}-${i}`;
            items.push({ id, tokens: t, components: [SHAPES[letter]], payload: `${model}|${id}|${t}|${letter}`,
                replyTo: `interop.${model}.${id}`, prefixTokens: 4, maxWaitMs: 500 });
            tokens += t;
        }
        const r = await client.submit(model, items);
        out[model] = { items: r.accepted, tokens, rejected: r.rejected };
    }
} else {
    const signs = new Map(Object.entries(SHAPES).map(([k, s]) => [shapeSign([s]), k]));
    const end = Date.now() + Number(a['timeout-s']) * 1000;
    await Promise.all(
        models.map(async (m) => {
            const seen = new Map();
            let bad = 0;
            const k = await client.consumer({ model: m, maxBatchSize: 8, maxBatchTokens: 4096, name: `node-${m}` });
            k.on('warning', () => {});
            while (seen.size < count && Date.now() < end) {
                const b = await k.next({ timeoutMs: Math.max(1, end - Date.now()) });
                if (b === null) break;
                const letter = signs.get(b.signature);
                for (const it of b.items) {
                    const id = it.id.toString();
                    const f = it.payload.toString().split('|');
                    const ok = b.model === m && letter !== undefined && f.length === 4 && f[0] === m && f[1] === id &&
                        f[2] === String(it.tokens) && f[3] === letter && it.replyTo === `interop.${m}.${id}` &&
                        it.prefixTokens === 4;
                    if (!ok) bad++;
                    seen.set(id, it.tokens);
                }
                if ((await b.ack()).code !== '') bad++;
            }
            await k.close();
            out[m] = { items: seen.size, tokens: [...seen.values()].reduce((x, y) => x + y, 0), bad };
        }),
    );
}
await client.close();
console.log(JSON.stringify({ models: out }));
