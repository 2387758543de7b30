// End-to-end scenarios for `dsh-actors serve`, driven by the official
// TypeScript MCP SDK (@modelcontextprotocol/sdk): a client in another
// language than the server's.
//
//   node client.mjs --stdio BINARY [--grace-ms MS]
//       spawns `BINARY serve` for each session (with `--grace MSms` when
//       given: the time calls in flight have to finish after SIGTERM)
//   node client.mjs --http URL --token T
//       talks to a running `serve --http`
//   --only SUBSTRING runs the scenarios whose names contain it
//   --tools-json FILE is `dsh-actors tools` output: the tools listed over MCP
//       must be exactly these, and the instructions its guidance
//
// Every scenario is named; a failure prints "FAIL <transport>/<scenario>: why"
// and the run exits 1 when any scenario failed (2 on a usage error). Every
// wait has a deadline: MCP requests carry a timeout, and what the kernel gives
// no event for (a process gone from /proc) is polled until a deadline.
//
// e2e_test.go runs this file; see it for how to run it by hand.

import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

// DEADLINE bounds every request and every wait. A healthy server answers in
// milliseconds; this is reached only when something is broken.
const DEADLINE_MS = 15000;

// E2E_VERBOSE=1 logs every tool call and its result to stderr.
const VERBOSE = process.env.E2E_VERBOSE === '1';

const EXPECTED_TOOLS = [
  'bash',
  'terminal_open',
  'terminal_send',
  'terminal_read',
  'terminal_signal',
  'terminal_resize',
  'terminal_close',
  'terminal_list',
  'task_output',
  'task_kill',
  'task_list',
];

// ---------------------------------------------------------------- arguments

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--stdio') o.stdio = val();
    else if (a === '--http') o.http = val();
    else if (a === '--token') o.token = val();
    else if (a === '--only') o.only = val();
    else if (a === '--grace-ms') o.graceMs = Number(val());
    else if (a === '--tools-json') o.toolsJSON = val();
    else usage(`unknown argument ${a}`);
  }
  if (!!o.stdio === !!o.http) usage('give exactly one of --stdio BINARY and --http URL');
  if (o.graceMs !== undefined && !(o.graceMs >= 0)) usage('--grace-ms takes a number of milliseconds');
  if (o.http && !o.token) usage('--http needs --token (the tests run the server with one)');
  return o;
}

function usage(why) {
  console.error(`client.mjs: ${why}\nusage: node client.mjs (--stdio BINARY [--grace-ms MS] | --http URL --token TOKEN) [--only SCENARIO] [--tools-json FILE]`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const MODE = opts.stdio ? 'stdio' : 'http';

// ---------------------------------------------------------------- helpers

class Failure extends Error {}

function fail(msg) {
  throw new Failure(msg);
}

function check(cond, msg) {
  if (!cond) fail(msg);
}

const show = (v) => JSON.stringify(v);

// withDeadline rejects when p has not settled within ms.
async function withDeadline(p, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// eventually polls cond (which returns [ok, seen]) every 10 ms until it
// holds, failing at the deadline with what it last saw. Only for states with
// no event to wait on (a process leaving /proc).
async function eventually(what, cond, ms = DEADLINE_MS) {
  const end = Date.now() + ms;
  for (;;) {
    const [ok, seen] = await cond();
    if (ok) return;
    if (Date.now() > end) fail(`${what}: not within ${ms} ms; last seen: ${seen}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// processes lists live processes whose command line (arguments joined by
// spaces) is exactly cmdline, as "pid cmdline".
function processes(cmdline) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let b;
    try {
      b = readFileSync(`/proc/${name}/cmdline`, 'latin1');
    } catch {
      continue; // gone
    }
    if (b === '') continue; // a zombie or a kernel thread
    const line = b.replace(/\0$/, '').split('\0').join(' ');
    if (line === cmdline) out.push(`${name} ${line}`);
  }
  return out;
}

// rescue kills the processes running cmdline, which this run started: how
// a scenario that found the server stuck behind a running call gets it
// going again, so that the scenarios after it are not affected.
function rescue(cmdline) {
  for (const p of processes(cmdline)) {
    try {
      process.kill(Number(p.split(' ')[0]), 'SIGKILL');
    } catch {
      // gone already
    }
  }
}

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

// canonical is JSON with object keys sorted, to compare values.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

// nonce gives command lines no other test (or run) uses.
const nonce = () => String(randomInt(100000, 1000000));

// textOf joins a tool result's text content.
function textOf(res) {
  return (res.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('');
}

// dataOf is a tool result's metadata, which travels in _meta (never in
// structuredContent, which some hosts show the model instead of the text).
function dataOf(res) {
  return res._meta?.['dsh-actors/data'] ?? {};
}

// ---------------------------------------------------------------- sessions

const authHeaders = (token) => ({ Authorization: `Bearer ${token}` });

// A session is one MCP client connection: one agent on the server.
class Session {
  constructor(name, client, transport) {
    this.name = name;
    this.client = client;
    this.transport = transport;
    this.closed = false;
  }

  // call runs a tool and returns its result; a JSON-RPC error is thrown.
  async call(tool, args) {
    try {
      const res = await this.client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: DEADLINE_MS,
      });
      if (VERBOSE) console.error(`[${this.name}] ${tool} ${show(args)} -> ${show(res)}`);
      return res;
    } catch (e) {
      if (VERBOSE) console.error(`[${this.name}] ${tool} ${show(args)} -> threw ${e.message}`);
      throw e;
    }
  }

  // ok runs a tool, fails unless the result is a success, and returns
  // {text, data, res}.
  async ok(tool, args) {
    let res;
    try {
      res = await this.call(tool, args);
    } catch (e) {
      fail(`${tool} ${show(args)}: JSON-RPC error: ${e.message}`);
    }
    const text = textOf(res);
    check(!res.isError, `${tool} ${show(args)}: error result: ${show(text)}`);
    return { text, data: dataOf(res), res };
  }

  // bash runs a command and returns its text.
  async bash(command) {
    return (await this.ok('bash', { command })).text;
  }

  // close ends the session as a client does: over HTTP with a DELETE of
  // the session (terminateSession), then the transport; over stdio by
  // closing the server's stdin (the SDK sends SIGTERM after 2 s if the
  // server is still there, and SIGKILL 2 s later).
  async close() {
    if (this.closed) return;
    this.closed = true;
    if (this.transport instanceof StreamableHTTPClientTransport) {
      await withDeadline(this.transport.terminateSession(), DEADLINE_MS, `${this.name}: DELETE of the session`);
    }
    await withDeadline(this.client.close(), DEADLINE_MS, `${this.name}: closing the client`);
  }
}

let sessionCount = 0;

// connect opens a new MCP session on the transport under test; over HTTP
// with the token, or with none when token is null.
async function connect(name = `session-${++sessionCount}`, { token = opts.token } = {}) {
  const client = new Client({ name: `dsh-actors-e2e-${name}`, version: '1.0.0' });
  let transport;
  if (MODE === 'stdio') {
    transport = new StdioClientTransport({
      command: opts.stdio,
      args: opts.graceMs === undefined ? ['serve'] : ['serve', '--grace', `${opts.graceMs}ms`],
      // The SDK passes only a few variables by default; the Go test's
      // process mark (DSH_TEST_MARK) and GORACE must reach the server.
      env: { ...process.env },
      stderr: 'inherit',
    });
  } else {
    const requestInit = token === null ? {} : { headers: authHeaders(token) };
    transport = new StreamableHTTPClientTransport(new URL(opts.http), { requestInit });
  }
  await withDeadline(client.connect(transport, { timeout: DEADLINE_MS }), DEADLINE_MS, `${name}: connecting`);
  const s = new Session(name, client, transport);
  s.child = transport._process; // stdio: the server's ChildProcess (SDK internals; undefined if they change)
  return s;
}

// checkEndedByEOF fails unless the stdio server exited because its stdin
// closed. The SDK's close ends the server's stdin, and sends SIGTERM when
// the server is still there 2 s later (SIGKILL 2 s after that): a server
// that needed the signal did not stop at the end of its input. Whether a
// signal was sent is the ChildProcess's `killed` flag (the pinned SDK keeps
// the child in `_process` until it exits: see connect).
function checkEndedByEOF(s, started) {
  const child = s.child;
  const took = Date.now() - started;
  if (child === undefined) {
    check(took < 2000, `the stdio server took ${took} ms to exit after its stdin closed (the SDK's SIGTERM comes at 2000 ms)`);
    return;
  }
  check(!child.killed, `the stdio server did not exit when its stdin closed: the SDK had to signal it (${took} ms; exit code ${child.exitCode}, signal ${child.signalCode})`);
  check(child.exitCode === 0, `the stdio server exited with code ${child.exitCode} (signal ${child.signalCode}) after its stdin closed`);
}

// ---------------------------------------------------------------- scenarios

const scenarios = [];
// only: run over that transport alone; alone: run only when asked for with
// --only.
const scenario = (name, fn, { only, alone } = {}) => scenarios.push({ name, fn, only, alone });

scenario('list-tools', async (open) => {
  const s = await open();
  const ver = s.client.getServerVersion();
  check(ver?.name === 'dsh-actors', `server name: ${show(ver)}`);
  const instructions = s.client.getInstructions();
  check(typeof instructions === 'string' && instructions.trim() !== '', `server instructions: ${show(instructions)}`);
  const { tools } = await s.client.listTools(undefined, { timeout: DEADLINE_MS });
  const names = tools.map((t) => t.name);
  for (const want of EXPECTED_TOOLS) {
    check(names.includes(want), `tool ${want} not listed; listed: ${show(names)}`);
  }
  for (const t of tools) {
    check(t.inputSchema?.type === 'object', `${t.name}: input schema is not an object schema: ${show(t.inputSchema)}`);
    check(typeof t.description === 'string' && t.description.trim() !== '', `${t.name}: no description`);
  }
  // The same tools, descriptions and schemas as `dsh-actors tools` prints,
  // and its guidance as the instructions.
  if (opts.toolsJSON) {
    const want = JSON.parse(readFileSync(opts.toolsJSON, 'utf8'));
    const wantNames = want.tools.map((t) => t.name).sort();
    check(show(names.slice().sort()) === show(wantNames), `tools listed over MCP ${show(names.slice().sort())}, \`dsh-actors tools\` has ${show(wantNames)}`);
    for (const w of want.tools) {
      const got = tools.find((t) => t.name === w.name);
      check(got.description === w.description, `${w.name}: description over MCP differs from \`dsh-actors tools\`: ${show(got.description)}`);
      check(canonical(got.inputSchema) === canonical(w.inputSchema), `${w.name}: input schema over MCP ${canonical(got.inputSchema)}, \`dsh-actors tools\` ${canonical(w.inputSchema)}`);
    }
    check(instructions === want.guidance, `instructions ${show(instructions)}, want the guidance ${show(want.guidance)}`);
  }
  const bash = tools.find((t) => t.name === 'bash');
  check(bash.inputSchema.properties?.command?.type === 'string', `bash: no string "command" in ${show(bash.inputSchema)}`);
  check((bash.inputSchema.required ?? []).includes('command'), `bash: "command" not required: ${show(bash.inputSchema)}`);
});

scenario('bash-persistent-state', async (open) => {
  const s = await open();
  const v = `value-${nonce()}`;
  const dir = `/tmp/dsh-e2e-${nonce()}`;
  await s.bash(`mkdir -p ${dir} && cd ${dir} && export E2E_VAR=${v} && e2e_fn() { echo "fn-$1"; }`);
  const got = await s.bash('echo "$E2E_VAR $PWD $(e2e_fn x)"');
  check(got === `${v} ${dir} fn-x\n`, `cd/export/function of one call not seen in the next: got ${show(got)}, want ${show(`${v} ${dir} fn-x\n`)}`);
  // The exit status: in the text and in the structured data.
  const r = await s.ok('bash', { command: 'echo out; (exit 3)' });
  check(r.text.includes('out') && r.text.includes('[exit code: 3]'), `exit status 3: text ${show(r.text)}`);
  check(r.data.exit_code === 3, `exit status 3: structured content ${show(r.data)}`);
  const z = await s.ok('bash', { command: 'true' });
  check(z.data.exit_code === 0, `exit status 0: structured content ${show(z.data)}`);
  await s.bash(`cd / && rm -rf ${dir}`);
});

scenario('sessions-isolated', async (open) => {
  const [a, b] = await Promise.all([open('a'), open('b')]);
  const v = `only-a-${nonce()}`;
  // The two sessions' calls run at the same time.
  await Promise.all([a.bash(`export E2E_ISO=${v}; cd /tmp`), b.bash('cd /')]);
  const [ga, gb] = await Promise.all([a.bash('echo "[${E2E_ISO-unset}] $PWD"'), b.bash('echo "[${E2E_ISO-unset}] $PWD"')]);
  check(ga === `[${v}] /tmp\n`, `session a lost its own state: ${show(ga)}`);
  check(gb === '[unset] /\n', `session b saw session a's variable or directory: ${show(gb)}`);
  // A shell is its pid in its pid namespace: each agent's sandbox has its
  // own, where both shells may have the same number.
  const shell = 'echo "$$ $(readlink /proc/$$/ns/pid)"';
  const [pa, pb] = await Promise.all([a.bash(shell), b.bash(shell)]);
  check(pa.trim() !== pb.trim(), `both sessions got the same shell (${pa.trim()})`);
  // A terminal belongs to the agent that opened it.
  const t = await a.ok('terminal_open', {});
  const id = t.data.terminal_id;
  check(typeof id === 'string' && id !== '', `terminal_open: no terminal_id in ${show(t.data)}`);
  const other = await b.call('terminal_read', { terminal_id: id });
  check(other.isError && /no such terminal/i.test(textOf(other)), `session b read session a's terminal ${id}: ${show(other)}`);
  const list = await b.ok('terminal_list', {});
  check(Array.isArray(list.data.terminals) && list.data.terminals.length === 0, `session b lists session a's terminal ${id}: ${show(list.data)}`);
  await a.ok('terminal_close', { terminal_id: id });
});

scenario('terminal-python3', async (open) => {
  const s = await open();
  const o = await s.ok('terminal_open', { command: 'python3 -q' });
  const id = o.data.terminal_id;
  check(typeof id === 'string' && id !== '', `terminal_open: no terminal_id in ${show(o.data)}`);
  check(o.data.running === true, `terminal_open python3: not running: ${show(o.data)}`);
  check(o.data.ready_reason === 'stdin_read', `terminal_open python3: ready_reason ${show(o.data.ready_reason)}, want stdin_read; text ${show(o.text)}`);
  const r = await s.ok('terminal_send', { terminal_id: id, text: 'print(6*7)', keys: ['Enter'], wait_ms: 10000 });
  check(r.text.includes('42'), `terminal_send print(6*7): no 42 in ${show(r.text)}`);
  check(r.data.ready_reason === 'stdin_read', `terminal_send: ready_reason ${show(r.data.ready_reason)}: ${show(r.text)}`);
  // State in the REPL carries over; output that comes later is read back.
  await s.ok('terminal_send', { terminal_id: id, text: 'x = "e2e-" + "py"', keys: ['Enter'], wait_ms: 10000 });
  await s.ok('terminal_send', { terminal_id: id, text: 'import threading; threading.Timer(0.2, lambda: print(x * 2)).start()', keys: ['Enter'], wait_ms: 10000 });
  let seen = '';
  await eventually('the timer thread output read back with terminal_read', async () => {
    const rd = await s.ok('terminal_read', { terminal_id: id, wait_ms: 200 });
    seen += rd.text;
    return [seen.includes('e2e-pye2e-py'), show(seen)];
  });
  const hist = await s.ok('terminal_read', { terminal_id: id, offset: 0, limit: 100000 });
  check(hist.text.includes('42') && hist.text.includes('print(6*7)'), `the retained history: ${show(hist.text)}`);
  const list = await s.ok('terminal_list', {});
  check((list.data.terminals ?? []).some((x) => x.terminal_id === id && x.running), `terminal_list does not list ${id} as running: ${show(list.data)}`);
  const c = await s.ok('terminal_close', { terminal_id: id });
  check(c.data.running === false && c.data.exit_status, `terminal_close: ${show(c.data)} ${show(c.text)}`);
  const gone = await s.ok('terminal_list', {});
  check(!(gone.data.terminals ?? []).some((x) => x.terminal_id === id && x.running), `terminal_list after terminal_close: ${show(gone.data)}`);
  const after = await s.call('terminal_send', { terminal_id: id, text: '1', keys: ['Enter'] });
  check(after.isError, `terminal_send to a closed terminal succeeded: ${show(after)}`);
});

scenario('terminal-bash', async (open) => {
  const s = await open();
  const o = await s.ok('terminal_open', { env: { E2E_TERM: 'from-env' } });
  const id = o.data.terminal_id;
  check(o.data.ready_reason === 'prompt', `terminal_open bash: ready_reason ${show(o.data.ready_reason)}, want prompt; its text: ${show(o.text)}; data ${show(o.data)}`);
  const r = await s.ok('terminal_send', { terminal_id: id, text: 'echo "$E2E_TERM $((6*7))"', keys: ['Enter'], wait_ms: 10000 });
  check(r.text.includes('from-env 42'), `echo in a bash terminal: ${show(r.text)}`);
  check(r.data.ready_reason === 'prompt', `terminal_send bash: ready_reason ${show(r.data.ready_reason)}: ${show(r.text)}`);
  const e = await s.ok('terminal_send', { terminal_id: id, text: 'exit 7', keys: ['Enter'], wait_ms: 10000 });
  check(e.data.ready_reason === 'exited' || e.data.running === false, `exit 7: ${show(e.data)} ${show(e.text)}`);
  check(e.data.exit_status?.code === 7, `exit 7: exit_status ${show(e.data.exit_status)}`);
  const c = await s.ok('terminal_close', { terminal_id: id });
  check(c.data.running === false && c.data.exit_status?.code === 7, `terminal_close after exit 7: ${show(c.data)} ${show(c.text)}`);
});

scenario('background-task-kill', async (open) => {
  const s = await open();
  const sleep = `sleep 4712.${nonce()}`;
  const o = await s.ok('terminal_open', {});
  const id = o.data.terminal_id;
  const bg = await s.ok('terminal_send', { terminal_id: id, text: `${sleep}; echo task-done-$((40+2))`, keys: ['Enter'], run_in_background: true });
  const task = bg.data.task_id;
  check(typeof task === 'string' && task !== '', `background terminal_send: no task_id in ${show(bg.data)} ${show(bg.text)}`);
  await eventually(`${sleep} running`, () => [processes(sleep).length === 1, show(processes(sleep))]);
  const running = await s.ok('task_output', { task_id: task, wait_ms: 100 });
  check(running.data.running === true, `task_output before the kill: ${show(running.data)} ${show(running.text)}`);
  // While the task holds it, the terminal is busy.
  const busy = await s.call('terminal_send', { terminal_id: id, text: 'echo no', keys: ['Enter'] });
  check(busy.isError && /busy/i.test(textOf(busy)), `a send while the task holds the terminal: ${show(busy)}`);
  const tl = await s.ok('task_list', {});
  check(tl.text.includes(task), `task_list does not list ${task}: ${show(tl.text)}`);
  const k = await s.ok('task_kill', { task_id: task });
  check(k.data.running !== true, `task_kill: ${show(k.data)} ${show(k.text)}`);
  const done = await s.ok('task_output', { task_id: task, wait_ms: 5000 });
  check(done.data.running === false, `task_output after task_kill: still running: ${show(done.data)} ${show(done.text)}`);
  check(!(done.text + k.text).includes('task-done-42'), `the killed task ran on to its end: ${show(done.text)}`);
  await eventually(`${sleep} gone after task_kill`, () => [processes(sleep).length === 0, show(processes(sleep))]);
  // The terminal is free again, and its shell still works.
  const again = await s.ok('terminal_send', { terminal_id: id, text: 'echo after-$((1+1))', keys: ['Enter'], wait_ms: 10000 });
  check(again.text.includes('after-2'), `the terminal after task_kill: ${show(again.text)}`);
  await s.ok('terminal_close', { terminal_id: id });
});

scenario('bash-output-edges', async (open) => {
  const s = await open();
  // Invalid UTF-8 becomes U+FFFD and NUL U+2400; the text survives JSON.
  const odd = await s.bash("printf 'a\\377b\\000c\\n'");
  check(odd === 'a\uFFFDb\u2400c\n', `invalid UTF-8 and NUL: got ${show(odd)}, want ${show('a\uFFFDb\u2400c\n')}`);
  const uni = await s.bash("printf 'h\\303\\251 \\360\\237\\230\\200\\n'");
  check(uni === 'h\u00e9 \u{1F600}\n', `UTF-8 output: ${show(uni)}`);
  // Long output keeps its beginning and its end, and says between them how
  // much was left out.
  const long = await s.ok('bash', { command: 'yes 0123456789 | head -n 500000; echo RESULT: 42' });
  check(long.text.startsWith('0123456789\n0123456789\n'), `long output: beginning ${show(long.text.slice(0, 40))}`);
  check(long.text.length < 100000 && long.text.endsWith('0123456789\nRESULT: 42\n') && /\[output clipped: \d+ bytes were left out here/.test(long.text),
    `long output (5.5 MB): ${long.text.length} chars, ends ${show(long.text.slice(-300))}`);
  if (VERBOSE) console.error(`long output ends ${show(long.text.slice(-300))}`);
  check(long.data.exit_code === 0, `long output: ${show(long.data)}`);
  // Stdout and stderr together, in order.
  const both = await s.bash('echo one; echo two >&2; echo three');
  check(both === 'one\ntwo\nthree\n', `stdout and stderr: ${show(both)}`);
  // Several lines run as a script; a command reading stdin does not eat
  // the next line.
  const script = await s.bash('echo first\nread -t 0.2 x; echo "x=[$x]"\necho last');
  check(script === 'first\nx=[]\nlast\n', `a multi-line command whose second line reads stdin: ${show(script)}`);
});

scenario('bash-timeout-and-cancel', async (open) => {
  const s = await open();
  const n = nonce();
  await s.bash('export E2E_BEFORE=1');
  // timeout_ms: partial output, the shell is killed, the next call starts fresh.
  const timed = `sleep 4714.${n}1`;
  const t0 = Date.now();
  const r = await s.call('bash', { command: `echo partial; ${timed}`, timeout_ms: 500 });
  const took = Date.now() - t0;
  check(r.isError && textOf(r).startsWith('partial\n') && /timed out/.test(textOf(r)), `bash past timeout_ms: ${show(r)}`);
  check(dataOf(r).timed_out === true, `bash past timeout_ms: metadata ${show(r._meta)}`);
  check(r.structuredContent === undefined, `bash past timeout_ms: structuredContent (hosts would show it to the model instead of the text): ${show(r.structuredContent)}`);
  check(took < 5000, `bash with timeout_ms 500 took ${took} ms`);
  await eventually(`${timed} gone after the timeout`, () => [processes(timed).length === 0, show(processes(timed))]);
  const fresh = await s.ok('bash', { command: 'echo "[${E2E_BEFORE-unset}]"' });
  check(fresh.text === '[unset]\n' && fresh.data.fresh_shell === true, `the call after a timeout: ${show(fresh)}`);
  // A call the client cancels (notifications/cancelled) is Ctrl-C: the
  // command is interrupted and gone, the shell and its state stay, and the
  // next result says what happened to it.
  await s.bash('export E2E_BEFORE=2');
  const cancelled = `sleep 4714.${n}2`;
  const ac = new AbortController();
  const pending = s.client.callTool({ name: 'bash', arguments: { command: `echo before-the-cancel; ${cancelled}` } }, undefined, { signal: ac.signal, timeout: DEADLINE_MS });
  const outcome = pending.then(
    (res) => ({ res }),
    (err) => ({ err }),
  );
  await eventually(`${cancelled} running`, () => [processes(cancelled).length === 1, show(processes(cancelled))]);
  ac.abort('e2e cancels the call');
  const o = await withDeadline(outcome, DEADLINE_MS, 'the cancelled call');
  check(o.err, `the cancelled call resolved: ${show(o.res)}`);
  await eventually(`${cancelled} gone after the cancellation`, () => [processes(cancelled).length === 0, show(processes(cancelled))]);
  const after = await s.ok('bash', { command: 'echo "[${E2E_BEFORE-unset}] ok"' });
  check(after.text.endsWith('[2] ok\n') && /cancelled by its caller/.test(after.text) && /before-the-cancel/.test(after.text) &&
    /\[exit code: 130\]/.test(after.text) && after.data.fresh_shell === undefined, `the call after a cancelled one: ${show(after)}`);
});

scenario('concurrent-calls-one-session', async (open) => {
  const s = await open();
  // Calls of one session at the same time: each gets its own answer.
  const jobs = [];
  for (let i = 0; i < 6; i++) jobs.push(s.ok('bash', { command: `sleep 0.0${i}; echo call-${i}` }));
  const t = await s.ok('terminal_open', { command: 'python3 -q' });
  jobs.push(s.ok('terminal_send', { terminal_id: t.data.terminal_id, text: 'print("py-" + str(6*7))', keys: ['Enter'], wait_ms: 10000 }));
  const res = await Promise.all(jobs);
  for (let i = 0; i < 6; i++) check(res[i].text === `call-${i}\n`, `concurrent bash call ${i}: ${show(res[i].text)}`);
  check(res[6].text.includes('py-42'), `terminal_send beside bash calls: ${show(res[6].text)}`);
  await s.ok('terminal_close', { terminal_id: t.data.terminal_id });
});

scenario('bad-input', async (open) => {
  const s = await open();
  // expectError: an error result or a JSON-RPC error, with a message
  // matching re.
  const expectError = async (what, tool, args, re) => {
    let msg;
    try {
      const res = await s.call(tool, args);
      check(res.isError, `${what}: succeeded: ${show(res)}`);
      msg = textOf(res);
    } catch (e) {
      if (e instanceof Failure) throw e;
      msg = e.message;
    }
    check(re.test(msg), `${what}: message ${show(msg)} does not match ${re}`);
  };
  await expectError('bash with a number for command', 'bash', { command: 5 }, /command/);
  await expectError('bash without command', 'bash', {}, /command/);
  await expectError('bash with an unknown argument', 'bash', { command: 'true', bogus: 1 }, /bogus/);
  await expectError('terminal_read of no terminal', 'terminal_read', { terminal_id: 'no-such-id' }, /no such terminal/i);
  await expectError('task_kill of no task', 'task_kill', { task_id: 'no-such-task' }, /no such task|unknown task|not found/i);
  await expectError('terminal_send with an unknown key', 'terminal_send', { terminal_id: 'x', keys: ['NoSuchKey'] }, /NoSuchKey|key/);
  await expectError('an unknown tool', 'no_such_tool', {}, /no_such_tool|unknown tool|not found/i);
  // The session still works.
  const got = await s.bash('echo still-$((2+3))');
  check(got === 'still-5\n', `bash after the bad calls: ${show(got)}`);
});

// Only over HTTP: raw requests that no SDK client would send.
const httpOnly = { only: 'http' };

async function post(body, headers = {}) {
  const res = await withDeadline(
    fetch(opts.http, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        ...headers,
      },
      body,
      signal: AbortSignal.timeout(DEADLINE_MS),
    }),
    DEADLINE_MS,
    `POST ${opts.http}`,
  );
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const initialize = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw-e2e', version: '1' } },
});

// protocolError: a 4xx, or a JSON-RPC error object in the body.
function protocolError(r) {
  if (r.status >= 400 && r.status < 500) return true;
  try {
    const m = JSON.parse(r.text.replace(/^(event|id):.*$/gm, '').replace(/^data: /m, ''));
    return typeof m.error?.code === 'number';
  } catch {
    return false;
  }
}

scenario(
  'http-malformed-requests',
  async (open) => {
    const auth = authHeaders(opts.token);
    // A session opened before the bad requests must survive them too.
    const before = await open('before');
    await before.bash('export E2E_KEPT=yes');
    const cases = [
      ['truncated JSON', '{"jsonrpc":"2.0","id":1,"method":"initialize","params":'],
      ['not JSON at all', 'hello, server'],
      ['a bare number', '5'],
      ['JSON that is not JSON-RPC', '{"foo": 1}'],
      ['JSON-RPC 1.0', '{"jsonrpc":"1.0","id":1,"method":"initialize","params":{}}'],
      ['an empty batch', '[]'],
      ['an unknown method', '{"jsonrpc":"2.0","id":1,"method":"no/such/method"}'],
      ['initialize with params that are not an object', '{"jsonrpc":"2.0","id":1,"method":"initialize","params":5}'],
      ['tools/list before initialize', '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'],
    ];
    for (const [what, body] of cases) {
      const r = await post(body, auth);
      check(r.status < 500, `${what}: server error ${r.status}: ${show(r.text)}`);
      check(protocolError(r), `${what}: status ${r.status}, body ${show(r.text)}: want a 4xx or a JSON-RPC error`);
    }
    // Neither a request nor a valid response (no result, no error): the Go
    // SDK takes it for a response and answers 202 Accepted. Tolerated; it
    // must not hurt the server.
    const noMethod = await post('{"jsonrpc":"2.0","id":1}', auth);
    check(noMethod.status < 500, `a JSON-RPC message with an id and nothing else: server error ${noMethod.status}: ${show(noMethod.text)}`);
    const unknown = await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }), { ...auth, 'Mcp-Session-Id': 'no-such-session' });
    check(unknown.status === 404, `a request of an unknown session: status ${unknown.status}, want 404: ${show(unknown.text)}`);
    const textPlain = await post(initialize, { ...auth, 'Content-Type': 'text/plain' });
    check(textPlain.status === 415, `initialize as text/plain: status ${textPlain.status}, want 415`);
    const crossSite = await post(initialize, { ...auth, Origin: 'http://evil.example', 'Sec-Fetch-Site': 'cross-site' });
    check(crossSite.status === 403, `initialize from a cross-site page: status ${crossSite.status}, want 403`);
    const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { pad: 'x'.repeat(5 << 20) } });
    const tooBig = await post(big, auth);
    check(tooBig.status === 413, `a 5 MiB body: status ${tooBig.status}, want 413 (bodies are bounded to 4 MiB)`);
    // The server is alive after them: the old session and a new one.
    const kept = await before.bash('echo "kept=$E2E_KEPT"');
    check(kept === 'kept=yes\n', `the session opened before the bad requests: ${show(kept)}`);
    const s = await open('after');
    const got = await s.bash('echo alive');
    check(got === 'alive\n', `bash in a new session after the malformed requests: ${show(got)}`);
  },
  httpOnly,
);

scenario(
  'http-token',
  async () => {
    const none = await post(initialize);
    check(none.status === 401, `initialize without a token: status ${none.status}, want 401: ${show(none.text)}`);
    check(/bearer/i.test(none.headers.get('www-authenticate') ?? ''), `401 without WWW-Authenticate: Bearer: ${show(none.headers.get('www-authenticate'))}`);
    const wrong = await post(initialize, authHeaders(`${opts.token}x`));
    check(wrong.status === 401, `initialize with a wrong token: status ${wrong.status}, want 401: ${show(wrong.text)}`);
    const basic = await post(initialize, { Authorization: `Basic ${Buffer.from(`u:${opts.token}`).toString('base64')}` });
    check(basic.status === 401, `initialize with the token as Basic auth: status ${basic.status}, want 401`);
    const right = await post(initialize, authHeaders(opts.token));
    check(right.status === 200, `initialize with the token: status ${right.status}, want 200: ${show(right.text)}`);
    const sid = right.headers.get('mcp-session-id');
    check(sid, 'initialize with the token: no Mcp-Session-Id');
    // A known session id does not stand in for the token.
    const stolen = await post(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }), { 'Mcp-Session-Id': sid });
    check(stolen.status === 401, `a session id without the token: status ${stolen.status}, want 401`);
    const del = await withDeadline(
      fetch(opts.http, { method: 'DELETE', headers: { ...authHeaders(opts.token), 'Mcp-Session-Id': sid }, signal: AbortSignal.timeout(DEADLINE_MS) }),
      DEADLINE_MS,
      'DELETE of the raw session',
    );
    check(del.status >= 200 && del.status < 300, `DELETE of the raw session: status ${del.status}`);
    // The SDK client: refused without the token and with a wrong one,
    // accepted with it.
    for (const [what, token] of [['no token', null], ['a wrong token', 'wrong']]) {
      let s;
      try {
        s = await connect(`refused-${what}`, { token });
      } catch (e) {
        check(/401|unauthori[sz]ed|bearer/i.test(`${e.message} ${e.code ?? ''}`), `the SDK client with ${what}: refused, but not as unauthorized: ${e.message}`);
        continue;
      }
      await s.close().catch(() => {});
      fail(`the SDK client with ${what} was accepted`);
    }
    const ok = await connect('with-token');
    try {
      const got = await ok.bash('echo authorized');
      check(got === 'authorized\n', `bash with the token: ${show(got)}`);
    } finally {
      await ok.close();
    }
  },
  httpOnly,
);

scenario('processes-gone-after-close', async (open) => {
  const n = nonce();
  const job = `sleep 4711.${n}1`;
  const escaped = `sleep 4711.${n}2`; // left its session with setsid
  const inTerminal = `sleep 4711.${n}3`;
  const s = await open();
  const pid = s.transport.pid; // stdio: the server process
  await s.bash(`${job} &`);
  await s.bash(`setsid ${escaped} > /dev/null 2>&1 < /dev/null &`);
  const t = await s.ok('terminal_open', {});
  await s.ok('terminal_send', { terminal_id: t.data.terminal_id, text: `${inTerminal} &`, keys: ['Enter'], wait_ms: 10000 });
  const all = () => [job, escaped, inTerminal].flatMap(processes);
  await eventually('the three sleeps running', () => [all().length === 3, show(all())]);
  const started = Date.now();
  await s.close();
  await eventually('every process of the closed session gone', () => [all().length === 0, show(all())]);
  if (MODE === 'stdio') {
    await eventually(`the stdio server (pid ${pid}) gone`, () => [!alive(pid), `pid ${pid} alive`]);
    checkEndedByEOF(s, started);
  }
});

// Ending a session while one of its calls runs: the call is abandoned and
// the session's processes are gone, promptly. Over stdio the client closes
// the server's stdin; over HTTP it DELETEs the session.
scenario('close-during-a-call', async (open) => {
  const s = await open();
  const pid = s.transport.pid;
  const cmd = `sleep 4718.${nonce()}`;
  const pending = s.client.callTool({ name: 'bash', arguments: { command: cmd } }, undefined, { timeout: 4 * DEADLINE_MS }).then(
    (res) => ({ res }),
    (err) => ({ err }),
  );
  await eventually(`${cmd} running`, () => [processes(cmd).length === 1, show(processes(cmd))]);
  const started = Date.now();
  if (MODE === 'http') {
    s.closed = true;
    const del = s.transport.terminateSession();
    try {
      await withDeadline(del, 5000, 'DELETE of the session while a bash call runs');
    } catch (e) {
      // Rescue the server: once the command ends (we kill it) the call
      // returns and the DELETE finishes, so the rest of the run is not
      // affected. (Cancelling the call would do too, but the SDK's close
      // may abort the notifications/cancelled before it is sent.)
      rescue(cmd);
      await withDeadline(del, DEADLINE_MS, 'the DELETE, once the command was killed');
      await withDeadline(s.client.close(), DEADLINE_MS, 'closing the client');
      throw e;
    }
    await withDeadline(s.client.close(), DEADLINE_MS, 'closing the client');
  } else {
    await s.close();
  }
  const o = await withDeadline(pending, DEADLINE_MS, 'the call in flight when its session closed');
  if (MODE === 'http') {
    // The server stops the session's calls before it ends the session, and
    // says so in their results.
    check(o.err || (o.res?.isError && JSON.stringify(o.res).includes('the client ended the session')),
      `the call in flight when its session ended: ${o.err ? o.err : show(o.res)}`);
  } else {
    check(o.err, `the call in flight when its session closed got an answer: ${show(o.res)}`);
  }
  await eventually(`${cmd} gone after its session closed during the call`, () => [processes(cmd).length === 0, show(processes(cmd))]);
  if (MODE === 'stdio') {
    await eventually(`the stdio server (pid ${pid}) gone`, () => [!alive(pid), `pid ${pid} alive`]);
    checkEndedByEOF(s, started);
  }
});

// SIGTERM to the stdio server while a call runs: it must stop, with its
// processes, without waiting for the call to end by itself. (Over HTTP the
// Go test does the same to the server it started.)
scenario(
  'sigterm-during-a-call',
  async (open) => {
    const s = await open();
    const pid = s.transport.pid;
    const cmd = `sleep 4722.${nonce()}`;
    const pending = s.client.callTool({ name: 'bash', arguments: { command: cmd } }, undefined, { timeout: 4 * DEADLINE_MS }).then(
      (res) => ({ res }),
      (err) => ({ err }),
    );
    await eventually(`${cmd} running`, () => [processes(cmd).length === 1, show(processes(cmd))]);
    process.kill(pid, 'SIGTERM');
    // The server may give the call --grace to finish; then it cancels it.
    const limit = (opts.graceMs ?? 0) + 10000;
    try {
      await eventually(`the stdio server (pid ${pid}) gone after SIGTERM while a bash call runs (grace ${opts.graceMs ?? 'none'} ms)`, () => [!alive(pid), `pid ${pid} alive; ${show(processes(cmd))}`], limit);
    } catch (e) {
      // Rescue: once the command ends (we kill it) the call returns and
      // the server finishes stopping.
      rescue(cmd);
      await eventually(`the stdio server (pid ${pid}) gone once the command was killed`, () => [!alive(pid), `pid ${pid} alive`]);
      throw e;
    }
    const o = await withDeadline(pending, DEADLINE_MS, 'the call in flight at SIGTERM');
    if (VERBOSE) console.error(`the call in flight at SIGTERM: ${show(o.res ?? o.err?.message)}`);
    await eventually(`${cmd} gone after SIGTERM`, () => [processes(cmd).length === 0, show(processes(cmd))]);
  },
  { only: 'stdio' },
);

// Run alone (--only call-left-in-flight) by the Go test: a bash call still
// running when the client exits; the Go test then sends SIGTERM to the HTTP
// server and expects it to stop promptly, with the command gone.
scenario(
  'call-left-in-flight',
  async (open) => {
    const s = await open();
    s.abandoned = true;
    const cmd = `sleep 4724.${nonce()}`;
    s.call('bash', { command: cmd }).catch(() => {});
    await eventually(`${cmd} running`, () => [processes(cmd).length === 1, show(processes(cmd))]);
    console.log(`LEFT-RUNNING ${cmd}`);
  },
  { only: 'http', alone: true },
);

// Last: a session the client leaves without closing it. Over stdio the
// client's exit closes the server's stdin; over HTTP the session stays
// until the server stops. The Go test reads the LEFT-RUNNING line and checks
// that the command is gone: over stdio once node has exited, over HTTP once
// the server has stopped (SIGTERM).
scenario('abandoned-session', async (open) => {
  const s = await open();
  s.abandoned = true;
  const cmd = `sleep 4719.${nonce()}`;
  await s.bash(`${cmd} &`);
  await eventually(`${cmd} running`, () => [processes(cmd).length === 1, show(processes(cmd))]);
  if (MODE === 'http') {
    // Drop the connection without the DELETE that ends the session.
    await withDeadline(s.client.close(), DEADLINE_MS, 'closing the client without ending the session');
  }
  console.log(`LEFT-RUNNING ${cmd}`);
});

// ---------------------------------------------------------------- main

async function main() {
  let failed = 0;
  let ran = 0;
  const t0 = Date.now();
  for (const sc of scenarios) {
    if (sc.only && sc.only !== MODE) continue;
    if (opts.only ? !sc.name.includes(opts.only) : sc.alone) continue;
    ran++;
    const name = `${MODE}/${sc.name}`;
    const sessions = [];
    const open = async (label) => {
      const s = await connect(label ? `${sc.name}-${label}` : sc.name);
      sessions.push(s);
      return s;
    };
    const start = Date.now();
    try {
      await withDeadline(sc.fn(open), 4 * DEADLINE_MS, name);
      console.log(`ok   ${name} (${Date.now() - start} ms)`);
    } catch (e) {
      failed++;
      const why = e instanceof Failure ? e.message : e?.stack ?? String(e);
      console.log(`FAIL ${name} (${Date.now() - start} ms): ${why}`);
    } finally {
      for (const s of sessions) {
        if (s.abandoned) continue;
        try {
          await s.close();
        } catch (e) {
          failed++;
          console.log(`FAIL ${name}: closing ${s.name}: ${e.message}`);
        }
      }
    }
  }
  if (ran === 0) {
    console.log(`FAIL ${MODE}: no scenario ran`);
    failed++;
  }
  console.log(`${failed === 0 ? 'PASS' : 'FAIL'} ${MODE}: ${ran} scenarios, ${failed} failed, ${Date.now() - t0} ms`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.log(`FAIL ${MODE}: ${e?.stack ?? e}`);
    process.exit(1);
  },
);
