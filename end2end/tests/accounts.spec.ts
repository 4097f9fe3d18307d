import { test, expect, Page } from '@playwright/test';
import * as path from 'node:path';
import { appReady, admin, bearer, callApi, signIn, startAgent, unique, AgentProcess } from './helpers';

// Issue: accounts and roles. Signing in and out through the forms; a viewer sees a release
// but none of its buttons; an editor advances it; an admin manages users and API tokens.

const shots = path.resolve(__dirname, '../test-results/screenshots');

type Environment = { id: string; name: string };
type Release = { id: string; status: string };

/** The Sign out button of the header (the users page also has "Sign out ... everywhere"). */
function signOutButton(page: Page) {
  return page.getByRole('button', { name: 'Sign out', exact: true });
}

test.describe('signing in and out', () => {
  test('a signed-out visitor lands on the sign-in page; a wrong password is refused, the right one opens the fleet', async ({ page }) => {
    await page.goto('/');
    await appReady(page);
    await expect(page).toHaveURL((url) => url.pathname === '/signin' && url.searchParams.get('next') === '/');
    await expect(page.getByRole('heading', { name: 'Sign in to VectorFlow' })).toBeVisible();
    // A bare frame: no navigation before signing in.
    await expect(page.getByRole('navigation', { name: 'Main' })).toHaveCount(0);
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.screenshot({ path: path.join(shots, 'signin.png') });

    await page.getByLabel('Email').fill(admin.email);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page).toHaveURL((url) => url.pathname === '/signin' && url.searchParams.has('error'));
    await expect(page.getByRole('alert')).not.toBeEmpty();

    await page.getByLabel('Email').fill(admin.email);
    await page.getByLabel('Password').fill(admin.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page).toHaveURL(/\/$/);
    await expect(page.getByRole('heading', { level: 1, name: 'Fleet' })).toBeVisible();
    await expect(page.getByTestId('signed-in-as')).toHaveText(admin.email);

    await signOutButton(page).click();
    await expect(page).toHaveURL(/\/signin$/);
    // The session is gone: pages send to the sign-in page again.
    await page.goto('/pipelines');
    await appReady(page);
    await expect(page).toHaveURL((url) => url.pathname === '/signin' && url.searchParams.get('next') === '/pipelines');
  });

  test('after signing in, the page asked for first opens', async ({ page }) => {
    await page.goto('/environments');
    await appReady(page);
    await page.getByLabel('Email').fill(admin.email);
    await page.getByLabel('Password').fill(admin.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page).toHaveURL(/\/environments$/);
    await expect(page.getByRole('heading', { level: 1, name: 'Environments' })).toBeVisible();
  });

  test('a user changes their own password, is signed out, and signs in with the new one', async ({ page, request }) => {
    const email = `${unique('self')}@e2e.test`;
    await callApi(request, 'user.create', { email, password: 'first-password-1', grants: [{ environment_id: '*', role: 'viewer' }] });
    await signIn(page, email, 'first-password-1');
    await page.getByTestId('signed-in-as').click();
    await expect(page.getByRole('heading', { level: 1, name: 'Your account' })).toBeVisible();
    await expect(page.getByRole('list', { name: 'Your roles' })).toContainText('viewer in all environments');

    const form = page.getByRole('form', { name: 'Change password' });
    await form.getByLabel('Current password').fill('not-my-password');
    await form.getByLabel('New password').fill('second-password-2');
    await form.getByRole('button', { name: 'Change password' }).click();
    await expect(form.getByRole('alert')).toContainText('current_password');

    await form.getByLabel('Current password').fill('first-password-1');
    await form.getByRole('button', { name: 'Change password' }).click();
    await expect(form.getByRole('status')).toContainText('Password changed');
    await page.goto('/');
    await expect(page).toHaveURL(/\/signin/);
    await signIn(page, email, 'second-password-2');
    await expect(page.getByTestId('signed-in-as')).toHaveText(email);
  });
});

test.describe('roles on the rollout view', () => {
  let agent: AgentProcess | undefined;
  test.afterEach(async () => {
    await agent?.stop();
  });

  test('a viewer sees a release without its buttons; an editor advances it to stage 2', async ({ page, request, baseURL }) => {
    const password = 'e2e-role-password';
    const viewer = `${unique('viewer')}@e2e.test`;
    const editor = `${unique('editor')}@e2e.test`;
    for (const [email, role] of [[viewer, 'viewer'], [editor, 'editor']]) {
      await callApi(request, 'user.create', { email, password, grants: [{ environment_id: '*', role }] });
    }

    // One node, a pipeline for it, and a two-stage release that waits for an operator.
    const run = unique('roles');
    agent = startAgent(baseURL!, ['--simulate', '1', '--hostname-template', `${run}-0`, '--label', `e2e-run=${run}`]);
    const envs = await callApi<Environment[]>(request, 'environment.list', {});
    const env = envs.find((e) => e.name === 'e2e')!;
    await expect
      .poll(async () => {
        const fleet = await callApi<{ nodes: { name: string }[] }>(request, 'fleet.nodes', { environment_id: env.id });
        return fleet.nodes.map((n) => n.name);
      })
      .toContain(`${run}-0`);
    const pipeline = await callApi<{ id: string }>(request, 'pipeline.create', {
      environment_id: env.id,
      name: unique('roles'),
      node_selector: { 'e2e-run': run },
    });
    const release = await callApi<Release>(request, 'release.canary.create', {
      pipeline_id: pipeline.id,
      config_yaml: 'sources: {}\n# canary\n',
      changelog: 'two stages',
      rollout_plan: {
        stages: [
          { selector: { labels: { 'e2e-run': run } }, bakeSeconds: 3600, gates: [] },
          { selector: { percentage: 100 }, bakeSeconds: 3600, gates: [] },
        ],
        autoAdvance: false,
      },
    });
    expect(release.status).toBe('CANARY_DEPLOYED');

    // The viewer sees the release and its stages, and nothing to press.
    await signIn(page, viewer, password);
    await page.goto(`/pipelines/${pipeline.id}`);
    await appReady(page);
    const rollout = page.getByTestId('rollout');
    await expect(rollout).toHaveAttribute('data-status', 'CANARY_DEPLOYED');
    await expect(page.getByTestId('stage-1')).toHaveAttribute('data-state', 'baking');
    await expect(page.getByTestId('stage-2')).toHaveAttribute('data-state', 'pending');
    for (const name of ['Advance next stage', 'Complete all remaining', 'Roll back']) {
      await expect(page.getByRole('button', { name })).toHaveCount(0);
    }
    await expect(page.getByRole('form', { name: 'Deploy' })).toHaveCount(0);
    await expect(page.getByRole('link', { name: 'Users' })).toHaveCount(0);
    await page.goto('/pipelines');
    await appReady(page);
    await expect(page.getByTestId('pipelines-table')).toBeVisible();
    await expect(page.getByRole('button', { name: 'Create pipeline' })).toHaveCount(0);
    await page.goto('/environments');
    await appReady(page);
    await expect(page.getByText('Enrollment tokens of e2e are managed by its admins.')).toBeVisible();
    await expect(page.getByRole('button', { name: 'Create environment' })).toHaveCount(0);
    await page.goto('/admin/edge-config');
    await appReady(page);
    await expect(page.getByRole('region', { name: 'Bucket lookup' })).toBeVisible();
    await expect(page.getByRole('button', { name: 'Create rollout' })).toHaveCount(0);
    await signOutButton(page).click();
    await expect(page).toHaveURL(/\/signin$/);

    // The editor may deploy (once this release is over: the dialog says so meanwhile) and
    // advance (not roll back someone else's release).
    await signIn(page, editor, password);
    await page.goto(`/pipelines/${pipeline.id}`);
    await appReady(page);
    await expect(page.getByTestId('deploy-locked')).toContainText('is in flight');
    await expect(page.getByRole('button', { name: 'Roll back' })).toHaveCount(0);
    const advance = page.getByRole('button', { name: 'Advance next stage' });
    await expect(advance).toBeVisible();
    // The button works once the page hydrated: press until stage 2 opens.
    await expect(async () => {
      if (await advance.isVisible()) await advance.click();
      await expect(page.getByTestId('stage-2')).toHaveAttribute('data-state', 'baking', { timeout: 3_000 });
    }).toPass({ timeout: 30_000 });
    await expect(page.getByTestId('stage-1')).toHaveAttribute('data-state', 'passed');
    await expect(rollout).toHaveAttribute('data-status', 'CANARY_DEPLOYED');
    await expect(advance).toHaveCount(0);
  });
});

test.describe('the users page', () => {
  test('an admin creates a user and an API token shown once, which works until revoked', async ({ page, request }) => {
    await signIn(page);
    await page.getByRole('link', { name: 'Users' }).click();
    await expect(page.getByRole('heading', { level: 1, name: 'Users and API tokens' })).toBeVisible();
    await expect(page.locator(`tr[data-user="${admin.email}"]`)).toContainText('admin in All environments');

    // A user who edits the e2e environment only.
    const email = `${unique('ops')}@e2e.test`;
    const newUser = page.getByRole('form', { name: 'New user' });
    await newUser.getByLabel('Email').fill(email);
    await newUser.getByLabel('Password').fill('e2e-ops-password');
    await newUser.getByLabel('Role').selectOption('editor');
    await newUser.getByLabel('Environment').selectOption({ label: 'e2e' });
    await newUser.getByRole('button', { name: 'Create user' }).click();
    await expect(newUser.getByRole('status')).toHaveText(`Created ${email}`);
    const row = page.locator(`tr[data-user="${email}"]`);
    await expect(row).toContainText('editor in e2e');
    await expect(row).toContainText('active');

    // A second role, everywhere; the first stays.
    const roles = row.getByRole('form', { name: `Roles of ${email}` });
    await roles.getByLabel('Role').selectOption('viewer');
    await roles.getByLabel('Environment').selectOption({ label: 'All environments' });
    await roles.getByRole('button', { name: 'Set role' }).click();
    await expect(row).toContainText('viewer in All environments');
    await expect(row).toContainText('editor in e2e');

    // An API token: shown once, listed by prefix, works until revoked.
    const name = unique('ci');
    const newToken = page.getByRole('form', { name: 'New API token' });
    await newToken.getByLabel('Name').fill(name);
    await newToken.getByLabel('Role').selectOption('viewer');
    await newToken.getByRole('button', { name: 'Create API token' }).click();
    const token = (await page.getByTestId('new-api-token').textContent())!.trim();
    expect(token.length).toBeGreaterThan(16);
    const tokenRow = page.locator(`tr[data-token="${name}"]`);
    await expect(tokenRow).toContainText('All environments');
    await expect(tokenRow).toContainText('viewer');
    await expect(tokenRow).toContainText('active');
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.screenshot({ path: path.join(shots, 'users.png'), fullPage: true });

    const me = await request.post('/api/session.me', { data: {}, headers: bearer(token) });
    expect(me.status()).toBe(200);
    expect((await me.json()).name).toBe(`token:${name}`);

    page.once('dialog', (d) => d.accept());
    await tokenRow.getByRole('button', { name: `Revoke API token ${name}` }).click();
    await expect(tokenRow).toContainText('revoked');
    const refused = await request.post('/api/session.me', { data: {}, headers: bearer(token) });
    expect(refused.status()).toBe(401);

    // Disabling the user asks first and shows in the list.
    page.once('dialog', (d) => d.accept());
    await row.getByRole('button', { name: `Disable ${email}` }).click();
    await expect(row).toContainText('disabled');
    await expect(row.getByRole('button', { name: `Enable ${email}` })).toBeVisible();
  });
});
