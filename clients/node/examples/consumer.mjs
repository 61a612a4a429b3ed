// A lanesched worker in Node.js: registers with its contract and cost, answers each item on its
// reply_to with a made-up completion, acks each batch; exits after --idle seconds without work.
//   node examples/consumer.mjs --model llama --idle 10
import { parseArgs } from 'node:util';
import { connect, shapeFormat } from '../src/index.js'; // or 'lanesched-client' once installed

const { values: a } = parseArgs({
    options: { server: { type: 'string' }, model: { type: 'string', default: 'llama' }, idle: { type: 'string', default: '10' } },
});
const client = await connect(a.server ? { servers: a.server } : {});
const worker = await client.consumer({
    model: a.model, maxBatchSize: 8, maxBatchTokens: 4096, name: 'node-example',
    batchFixedUs: 20000, tokenNs: 50, cacheShapes: 2, // what a batch costs this GPU
});
worker.on('warning', (w) => console.warn('lanesched:', w.message));
console.log('registered', worker.id);
for (;;) {
    const batch = await worker.next({ timeoutMs: Number(a.idle) * 1000 });
    if (batch === null) break;
    console.log(`batch ${batch.batchId}: ${batch.items.length} items, shape ${shapeFormat(batch.signature)}, pad_to ${batch.padTo}`);
    for (const item of batch.items) {
        if (item.replyTo) client.nc.publish(item.replyTo, JSON.stringify({ id: item.id.toString(), text: 'done' }));
    }
    await batch.ack();
}
await client.close();
