import * as crypto from 'node:crypto';
import * as http from 'node:http';
import { AddressInfo } from 'node:net';
import { test, expect } from '@playwright/test';
import { appReady, callApi, signIn, unique } from './helpers';

// Issue: automation. An admin registers a webhook on the Webhooks page, sees its secret once,
// receives a signed delivery for an event, sees it delivered and sends it again.
test('a webhook added on its page receives signed deliveries and can redeliver', async ({ page, request }) => {
  const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.writeHead(200);
      res.end('ok');
    });
  });
  await new Promise<void>((ready) => receiver.listen(0, '127.0.0.1', () => ready()));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/${unique('hook')}`;
  try {
    await signIn(page);
    await page.goto('/webhooks?env=e2e');
    await appReady(page);
    await page.getByLabel('URL').fill(url);
    await page.getByLabel('line.stopped').check();
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const shown = page.getByTestId('webhook-secret');
    await expect(shown).toContainText('vfw_');
    const secret = (await shown.locator('code').textContent())!;
    const row = page.getByTestId('webhooks-table').locator('tr', { hasText: url });
    await expect(row).toContainText('line.stopped');
    await expect(page.getByTestId('webhooks-table')).not.toContainText(secret);

    // An event: the environment's line stops (and is lifted at once).
    const envs = await callApi<{ id: string; name: string }[]>(request, 'environment.list', {});
    const env = envs.find((e) => e.name === 'e2e')!;
    await callApi(request, 'environment.line.stop', { environment_id: env.id, reason: 'webhooks spec' });
    await callApi(request, 'environment.line.lift', { environment_id: env.id });
    await expect.poll(() => got.length, { timeout: 15_000 }).toBe(1);
    const first = got[0];
    expect(first.headers['x-vectorflow-event']).toBe('line.stopped');
    expect(JSON.parse(first.body).event).toBe('line.stopped');
    // The receiver checks the signature with the secret the page showed.
    const expected = 'sha256=' + crypto.createHmac('sha256', secret).update(`${first.headers['x-vectorflow-timestamp']}.${first.body}`).digest('hex');
    expect(first.headers['x-vectorflow-signature']).toBe(expected);

    await row.getByTestId('show-deliveries').click();
    const deliveries = page.getByTestId('deliveries-table');
    await expect(deliveries.locator('tr[data-status="delivered"]')).toContainText('line.stopped');
    await expect(deliveries).toContainText('200');
    await deliveries.getByRole('button', { name: 'Redeliver' }).click();
    await expect.poll(() => got.length, { timeout: 15_000 }).toBe(2);
    expect(got[1].headers['idempotency-key']).toBe(first.headers['idempotency-key']);
  } finally {
    receiver.close();
  }
});
