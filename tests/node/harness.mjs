// harness.mjs - what the node tests of tests/node share: a free loopback port, waiting for a
// condition, the servers they start (nats-server, lanesched) with their stderr kept, and
// stopping them, lanesched before the nats-server it drains to.
import { spawn } from "node:child_process";
import { createServer, connect as tcpConnect } from "node:net";

export const LANESCHED = process.env.LANESCHED_BIN;
export const NATS_SERVER = process.env.LANES_NATS_SERVER || "nats-server";

// A TCP port of 127.0.0.1 that was free a moment ago.
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

export function accepting(p) {
  return new Promise((resolve) => {
    const c = tcpConnect(p, "127.0.0.1");
    c.once("connect", () => { c.destroy(); resolve(true); });
    c.once("error", () => resolve(false));
  });
}

export async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// The children a test file started, in order, and each one's stderr by name.
export const children = [];
export const logs = {};

export function start(name, bin, args) {
  const child = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  logs[name] = "";
  child.stderr.on("data", (d) => { logs[name] += d; });
  children.push(child);
  return child;
}

// A nats-server on a free port; resolves with its URL once it accepts connections.
export async function startNats() {
  const port = await freePort();
  start("nats", NATS_SERVER, ["-a", "127.0.0.1", "-p", String(port)]);
  await until("nats-server", () => accepting(port));
  return { port, url: `nats://127.0.0.1:${port}` };
}

// A lanesched named `name` with these flags; resolves once it is ready.
export async function startLanesched(name, args) {
  start(name, LANESCHED, args);
  await until(`lanesched ${name}`, () => logs[name].includes("lanesched: ready"));
}

// Stops every child, the last started first (lanesched before its nats-server), each with
// SIGTERM, and waits for it.
export async function stopAll() {
  for (const c of [...children].reverse()) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill("SIGTERM");
      await new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once("exit", r)));
    }
  }
}
