import { describe, expect, it } from 'vitest';
import {
  WritApiError,
  WritGaveUpError,
  createWritClient,
  executionObservation,
  rawErrorObservation,
  rawOutputObservation,
  type WritClientOptions,
} from '../../../src/client/index.js';

const KEY = 'writ_SECRETsecretSECRETsecretSECRETsecretSECRE';
const SHA = 'a'.repeat(64);

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | null;
  readonly body: unknown;
}

/** A scripted server: each call takes the next answer; every request is recorded. */
function scripted(answers: readonly (readonly [number, unknown, Record<string, string>?])[]) {
  const seen: Seen[] = [];
  let i = 0;
  const fetch = async (request: Request): Promise<Response> => {
    const text = await request.text();
    seen.push({
      method: request.method,
      url: request.url,
      authorization: request.headers.get('authorization'),
      body: text.length > 0 ? JSON.parse(text) : null,
    });
    const a = answers[Math.min(i++, answers.length - 1)];
    if (a === undefined) throw new Error('no answer scripted');
    return new Response(JSON.stringify(a[1]), {
      status: a[0],
      headers: { 'content-type': 'application/json', ...(a[2] ?? {}) },
    });
  };
  return { fetch, seen };
}

function client(fetch: NonNullable<WritClientOptions['fetch']>, extra: Partial<WritClientOptions> = {}) {
  const sleeps: number[] = [];
  const c = createWritClient({
    baseUrl: 'https://writ.test',
    key: KEY,
    fetch,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0,
    ...extra,
  });
  return { c, sleeps };
}

const wireError = (code: string, message = 'no') => ({
  error: { code, message, issues: [], request_id: 'req-1' },
});
const denied = { decision: 'denied', violations: ['approval_missing'], receipt: { sha256: SHA, body: {} } };
const authorizeBody = {
  tool_contract_sha256: SHA,
  input: { service: 'api' },
  idempotency_key: 'rollback-0001',
  run_id: 'run-1',
};

describe('the client', () => {
  it('sends the key only as a bearer header, and never keeps it where it can be printed', async () => {
    const s = scripted([[401, wireError('unauthenticated', 'missing or unknown key')]]);
    const { c } = client(s.fetch);
    const e = await c.getReceipt(SHA).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WritApiError);
    expect(s.seen[0]?.authorization).toBe(`Bearer ${KEY}`);
    expect(s.seen[0]?.url).toBe(`https://writ.test/v1/receipts/${SHA}`);
    const printed = [
      String(e),
      JSON.stringify(e),
      (e as Error).stack ?? '',
      JSON.stringify(c),
      JSON.stringify(c.api),
    ];
    for (const p of printed) expect(p).not.toContain('SECRET');
  });

  it('refuses a malformed key without quoting it', () => {
    const bad = 'writ_ SECRET with spaces';
    expect(() => createWritClient({ baseUrl: 'https://writ.test', key: bad })).toThrow(
      /^key must be a Writ API key$/,
    );
  });

  it('maps a wire error to WritApiError with status, code, issues and request id', async () => {
    const s = scripted([
      [
        400,
        {
          error: {
            code: 'invalid_request',
            message: 'input is not valid',
            issues: [{ path: 'run_id', message: 'x' }],
            request_id: 'req-9',
          },
        },
      ],
    ]);
    const e = (await client(s.fetch)
      .c.openRun({ max_calls: 1, max_external_writes: 0, max_duration_ms: 1 })
      .catch((x: unknown) => x)) as WritApiError;
    expect([e.status, e.code, e.requestId, e.issues]).toEqual([
      400,
      'invalid_request',
      'req-9',
      [{ path: 'run_id', message: 'x' }],
    ]);
  });

  it('a non-JSON answer is a malformed_response, not a crash', async () => {
    const fetch = async () => new Response('<html>bad gateway</html>', { status: 502 });
    const e = (await client(fetch)
      .c.getReceipt(SHA)
      .catch((x: unknown) => x)) as WritApiError;
    expect(e).toBeInstanceOf(WritApiError);
    expect(e.code).toBe('malformed_response');
  });

  it('a 429 waits Retry-After seconds and retries; a 5xx is never retried', async () => {
    const s = scripted([
      [429, wireError('rate_limited'), { 'retry-after': '2' }],
      [201, { run_id: 'run-1' }],
    ]);
    const events: number[] = [];
    const { c, sleeps } = client(s.fetch, { onRetry: (e) => events.push(e.waitMs) });
    await expect(c.openRun({ max_calls: 1, max_external_writes: 0, max_duration_ms: 1 })).resolves.toEqual({
      run_id: 'run-1',
    });
    expect(sleeps).toEqual([2000]);
    expect(events).toEqual([2000]);

    const f = scripted([
      [500, wireError('internal')],
      [201, {}],
    ]);
    const r = client(f.fetch);
    await expect(
      r.c.openRun({ max_calls: 1, max_external_writes: 0, max_duration_ms: 1 }),
    ).rejects.toMatchObject({ code: 'internal' });
    expect(f.seen).toHaveLength(1);
  });

  it('a Retry-After longer than the cap is not waited for', async () => {
    const s = scripted([[429, wireError('rate_limited'), { 'retry-after': '3600' }]]);
    const { c, sleeps } = client(s.fetch);
    await expect(c.getReceipt(SHA)).rejects.toMatchObject({ code: 'rate_limited', retryAfterSeconds: 3600 });
    expect(sleeps).toEqual([]);
  });

  it('a contended authorization is retried with the same body and idempotency key, with back-off', async () => {
    const contended = wireError('conflict', 'authorization is contended; retry the call');
    const s = scripted([
      [409, contended],
      [409, contended],
      [200, { decision: 'authorized', violations: [], receipt: { sha256: SHA, body: {} } }],
    ]);
    const { c, sleeps } = client(s.fetch);
    const r = await c.authorize(authorizeBody);
    expect(r.decision).toBe('authorized');
    expect(s.seen.map((x) => x.body)).toEqual([authorizeBody, authorizeBody, authorizeBody]);
    expect(sleeps).toEqual([50, 100]);
  });

  it('a 409 is retried only for authorize', async () => {
    const s = scripted([
      [409, wireError('conflict', 'already decided')],
      [200, {}],
    ]);
    await expect(client(s.fetch).c.approve('apr-1')).rejects.toMatchObject({ status: 409, code: 'conflict' });
    expect(s.seen).toHaveLength(1);
  });

  it('attempts are bounded: contention that never ends gives up', async () => {
    const s = scripted([[409, wireError('conflict', 'authorization is contended; retry the call')]]);
    const { c, sleeps } = client(s.fetch, { retry: { maxAttempts: 3 } });
    const e = await c.authorize(authorizeBody).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WritGaveUpError);
    expect((e as WritGaveUpError).last?.code).toBe('conflict');
    expect(s.seen).toHaveLength(3);
    expect(sleeps).toHaveLength(2);
  });

  it('a denial is a value; a 403 without a receipt is an error', async () => {
    const s = scripted([[403, denied]]);
    await expect(client(s.fetch).c.authorize(authorizeBody)).resolves.toEqual(denied);
    const f = scripted([[403, wireError('forbidden_role', 'this route needs the agent role')]]);
    await expect(client(f.fetch).c.authorize(authorizeBody)).rejects.toMatchObject({
      code: 'forbidden_role',
    });
  });

  it('a rejected report and a rejected observation are values', async () => {
    const report = {
      status: 'rejected',
      violations: ['executor_release_mismatch'],
      rejected: true,
      operation: {},
      execution_receipt: { sha256: SHA, body: {} },
    };
    const s = scripted([[403, report]]);
    const r = await client(s.fetch).c.report(reportInput('out'));
    expect(r).toEqual(report);
    const obs = {
      decision: 'rejected',
      violations: ['payload_digest_mismatch'],
      receipt: { sha256: SHA, body: {} },
    };
    const o = scripted([[403, obs]]);
    await expect(client(o.fetch).c.observe(observeInput('x'))).resolves.toEqual(obs);
  });

  it('waitForDecision polls with doubling waits until the approval is decided', async () => {
    const s = scripted([
      [200, { status: 'pending' }],
      [200, { status: 'pending' }],
      [200, { status: 'pending' }],
      [200, { status: 'approved' }],
    ]);
    const { c, sleeps } = client(s.fetch);
    await expect(c.waitForDecision('apr-1', { initialDelayMs: 100, maxDelayMs: 300 })).resolves.toEqual({
      status: 'approved',
    });
    expect(sleeps).toEqual([100, 200, 300]);
    expect(s.seen.every((x) => x.url === 'https://writ.test/v1/approval-requests/apr-1')).toBe(true);
  });

  it('waitForDecision gives up after its bounded polls', async () => {
    const s = scripted([[200, { status: 'pending' }]]);
    const { c, sleeps } = client(s.fetch);
    await expect(c.waitForDecision('apr-1', { maxAttempts: 4 })).rejects.toBeInstanceOf(WritGaveUpError);
    expect(s.seen).toHaveLength(4);
    expect(sleeps).toHaveLength(3);
  });
});

function reportInput(output: string | Uint8Array | null) {
  return {
    claim: { operation_id: 'b'.repeat(64), fencing_token: `1.${'0'.repeat(32)}` },
    authorization: {
      sha256: SHA,
      body: { invocation_sha256: 'c'.repeat(64), idempotency_key: 'rollback-0001' } as never,
    },
    observation_id: 'obs-1',
    executor_release: 'rollback-executor 1.4.2',
    outcome: 'succeeded' as const,
    started_at_unix_ms: 1000,
    completed_at_unix_ms: 1100,
    output,
    effect_id: 'deploy-1',
    before_state_sha256: 'd'.repeat(64),
    after_state_sha256: 'e'.repeat(64),
  };
}

function observeInput(payload: string) {
  return {
    execution_receipt: { sha256: 'f'.repeat(64) },
    authorization: {
      body: {
        tenant_id: 'ten-1',
        policy_sha256: '1'.repeat(64),
        tool_contract_sha256: '2'.repeat(64),
        invocation_sha256: '3'.repeat(64),
      } as never,
    },
    observation_id: 'obs-out-1',
    source_release: 'deploy-api 1',
    source_generation: 7,
    source_as_of_unix_ms: 5,
    observed_at_unix_ms: 6,
    media_type: 'application/json',
    payload,
  };
}

describe('evidence the client computes from bytes', () => {
  it('report: output digest and size come from the real bytes, the key and invocation from the receipt', () => {
    const o = executionObservation(reportInput('abc'));
    expect(o.output_sha256).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(o.output_bytes).toBe(3);
    expect(o.invocation_sha256).toBe('c'.repeat(64));
    expect(o.idempotency_key).toBe('rollback-0001');
    expect(o.authorization_receipt_sha256).toBe(SHA);
    const bytes = executionObservation(reportInput(new Uint8Array([0x61, 0x62, 0x63])));
    expect([bytes.output_sha256, bytes.output_bytes]).toEqual([o.output_sha256, 3]);
    const none = executionObservation(reportInput(null));
    expect([none.output_sha256, none.output_bytes]).toEqual([null, 0]);
  });

  it('observe: the payload digest and byte count are over its UTF-8 bytes', () => {
    const body = rawOutputObservation(observeInput('é€'));
    expect(body.kind).toBe('output');
    expect(body.observation.payload_bytes).toBe(5);
    expect(body.observation.payload_sha256).toBe(executionObservation(reportInput('é€')).output_sha256);
    expect(body.observation.execution_receipt_sha256).toBe('f'.repeat(64));
    expect(body.observation.tenant_id).toBe('ten-1');
    expect(body.observation.locators).toEqual([]);
  });

  it('observeError: a kind "error" body, the detail digest and byte count over its UTF-8 bytes', async () => {
    const input = errorInput('{"error":"é"}');
    const body = rawErrorObservation(input);
    expect(body.kind).toBe('error');
    expect(body.observation).toMatchObject({
      error_code: 'conflict',
      detail_bytes: 14,
      detail_sha256: executionObservation(reportInput('{"error":"é"}')).output_sha256,
      execution_receipt_sha256: 'f'.repeat(64),
      invocation_sha256: '3'.repeat(64),
    });
    const answer = {
      decision: 'accepted_error_diagnostic',
      violations: [],
      receipt: { sha256: SHA, body: {} },
    };
    const s = scripted([[201, answer]]);
    await expect(client(s.fetch).c.observeError(input)).resolves.toEqual(answer);
    expect(s.seen[0]?.url).toBe('https://writ.test/v1/observations');
    expect(s.seen[0]?.body).toEqual(body);
    // A rejection is a value, as for output observations.
    const rejected = {
      decision: 'rejected',
      violations: ['detail_digest_mismatch'],
      receipt: { sha256: SHA, body: {} },
    };
    const r = scripted([[403, rejected]]);
    await expect(client(r.fetch).c.observeError(input)).resolves.toEqual(rejected);
  });
});

function errorInput(detail: string) {
  const { payload: _p, source_generation: _g, source_as_of_unix_ms: _a, ...rest } = observeInput('');
  return { ...rest, observation_id: 'obs-err-1', error_code: 'conflict', detail };
}
