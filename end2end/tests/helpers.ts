import { spawn, ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const enrollmentToken = 'e2e-enrollment-token-000000';
const binDir = process.env.VF_BIN_DIR ?? path.resolve(__dirname, '../../target/debug');

/** A vf-agent process of this repo, with its own data dir. */
export class AgentProcess {
  constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
  ) {}

  /** Stops the agent and waits for it to exit. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await exited;
  }
}

/** Starts `vf-agent` against the e2e server; `args` are extra CLI flags. */
export function startAgent(baseURL: string, args: string[]): AgentProcess {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vf-e2e-agent-'));
  const child = spawn(
    path.join(binDir, 'vf-agent'),
    ['--server', baseURL, '--token', enrollmentToken, '--data-dir', dataDir, '--poll-interval-ms', '1000', ...args],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  // Never outlive the test run, even when a test fails before its cleanup.
  process.once('exit', () => child.kill('SIGKILL'));
  return new AgentProcess(child, dataDir);
}

/** A short random suffix so names from different runs never collide. */
export function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}
