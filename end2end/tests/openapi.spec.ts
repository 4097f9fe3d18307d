import { test, expect } from '@playwright/test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { bearer } from './helpers';

// Issue 16 (automation), the API description: an outside OpenAPI tool (swagger-parser, which
// checks a document against the OpenAPI 3.1 schema and resolves every reference) accepts
// what GET /api/openapi.json serves, and a client following only the document (its path, its
// security scheme, its documented statuses) gets what the document promises.
test('the API description is valid OpenAPI 3.1 and a client following it gets what it says', async ({ request }) => {
  const resp = await request.get('/api/openapi.json');
  expect(resp.status()).toBe(200);
  const doc = await resp.json();

  // Throws, naming the place, when the document is not valid OpenAPI or a $ref dangles.
  const api: any = await SwaggerParser.validate(structuredClone(doc));
  expect(api.openapi).toBe('3.1.0');
  const operations = Object.entries(api.paths as Record<string, any>);
  expect(operations.length).toBeGreaterThan(60);
  for (const [path, item] of operations) {
    expect(path.startsWith('/api/'), path).toBe(true);
    expect(['viewer', 'editor', 'admin'], path).toContain(item.post['x-vectorflow-role']);
  }

  // environment.list as the document describes it: POST, JSON body, bearer token.
  const list = doc.paths['/api/environment.list'].post;
  expect(Object.keys(doc.components.securitySchemes)).toContain('apiToken');
  const environments = await request.post('/api/environment.list', { data: {}, headers: bearer() });
  expect(environments.status()).toBe(200);
  expect(Object.keys(list.responses)).toContain('200');
  const names = (await environments.json()).map((e: { name: string }) => e.name);
  expect(names).toContain('e2e');

  // An unknown release: the answer's status is one the operation lists, with the text body
  // the shared error answers describe.
  const get = doc.paths['/api/release.canary.get'].post;
  const unknown = await request.post('/api/release.canary.get', {
    data: { release_id: '01a236ae-5836-77a6-a43b-0808c4e47897' },
    headers: bearer(),
  });
  expect(Object.keys(get.responses)).toContain(String(unknown.status()));
  expect(unknown.status()).toBe(404);
  expect(await unknown.text()).toMatch(/^ServerError\|/);

  // Without a token: 401, which every operation lists.
  const anonymous = await request.post('/api/environment.list', { data: {} });
  expect(anonymous.status()).toBe(401);
  expect(Object.keys(list.responses)).toContain('401');
});
