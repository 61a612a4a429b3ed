// index.js - the package's public surface: lanesched's Node.js client (README.md shows it in use).
export { connect, LanesClient, CONNECT_OPTIONS } from './client.js';
export { Consumer, PROTOCOL_VERSION, CONSUMER_OPTIONS } from './consumer.js';
export { Batch } from './batch.js';
export { shapeHash, shapeSign, shapeSignHashes, shapeFormat, shapeParse } from './shape.js';
export { encode, decode, ItemStatus, BatchStatus, protoPath } from './codec.js';
export { LanesError, codeWord, modelCheck, MODEL_MAX } from './errors.js';
export {
    REPLY_BYTES_PER_ITEM,
    SUBMIT_MAX_ITEMS,
    ITEM_FIELDS,
    SUBMIT_OPTIONS,
    plan as submitPlan,
    workItem,
} from './submit.js';
export { RETRY_DEFAULTS } from './retry.js';
