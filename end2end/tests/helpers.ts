import { spawn, ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { APIRequestContext, Page, expect } from '@playwright/test';

export const enrollmentToken = 'e2e-enrollment-token-000000';

/** The admin of every environment start-server.sh creates on the first start. */
export const admin = { email: 'admin@e2e.test', password: 'e2e-admin-password' };
/** The admin API token of every environment start-server.sh registers. */
export const adminApiToken = 'vfa_e2e-admin-api-token-0000000000';
/** Headers of an HTTP call made as `token` (by default the admin API token). */
export function bearer(token: string = adminApiToken): Record<string, string> {
  return { Authorization: `Bearer ${token}` };
}

/** Signs in through the sign-in form and waits to land past it, on a page that has started
 * (so links after it navigate in the app and forms work at once). */
export async function signIn(page: Page, email: string = admin.email, password: string = admin.password) {
  await page.goto('/signin');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname !== '/signin');
  await appReady(page);
}

/** Calls server function `endpoint` (`/api/<endpoint>`, JSON) as `token`; returns its answer. */
export async function callApi<T>(request: APIRequestContext, endpoint: string, args: object, token: string = adminApiToken): Promise<T> {
  const resp = await request.post(`/api/${endpoint}`, { data: args, headers: bearer(token) });
  expect(resp.status(), `${endpoint}: ${await resp.text()}`).toBe(200);
  return (await resp.json()) as T;
}
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

/** Creates a pipeline named `<prefix>-<random>` selecting the nodes labelled `e2e-run=<run>`
 * through the pipelines page, opens it, and returns its id. */
export async function createPipeline(page: Page, run: string, prefix: string): Promise<string> {
  const name = unique(prefix);
  await page.goto('/pipelines');
  await appReady(page);
  await page.getByLabel('Name').fill(name);
  await page.getByLabel(/Node selector/).fill(`e2e-run=${run}`);
  await page.getByRole('button', { name: 'Create pipeline' }).click();
  await page.getByRole('status').getByRole('link', { name }).click();
  await expect(page.getByRole('heading', { level: 1, name })).toBeVisible();
  return page.url().split('/pipelines/')[1];
}

/** A short random suffix so names from different runs never collide. */
export function unique(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Waits until the page has started in the browser (hydrated): before that, buttons and forms
 * do nothing, or submit natively. */
export async function appReady(page: Page) {
  await expect(page.locator('html')).toHaveAttribute('data-hydrated', 'true');
}
