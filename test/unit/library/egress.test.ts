/**
 * Read-only output classification and the egress policy (`src/library/egress.ts`): a class is only
 * ever raised, an unknown destination is denied, a message is as sensitive as its most sensitive
 * source or its own text, and every decision is monotonic.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  classifyReadOutput,
  DATA_CLASSES,
  type DataClass,
  type EgressPolicy,
  evaluateEgress,
} from '../../../src/library/egress.js';
import { SIGNAL_LIMITS } from '../../../src/core/observation/signals.js';

const AWS_KEY = 'AKIA2E0A8F3B244C9986';
const RECEIPT = 'a'.repeat(64);
const OTHER = 'b'.repeat(64);

const POLICY: EgressPolicy = {
  destinations: [
    { destination: 'slack:acme/ops', max_class: 'confidential' },
    { destination: 'email:acme.com', max_class: 'internal' },
    { destination: 'email:example.org', max_class: 'public' },
  ],
};

function decide(request: unknown, policy: unknown = POLICY) {
  const r = evaluateEgress(policy, request);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

const send = (destination: string, classes: DataClass[], text = 'Deployment api is healthy.') => ({
  destination,
  sources: classes.map((data_class, i) => ({ receipt_sha256: i % 2 ? OTHER : RECEIPT, data_class })),
  text,
});

describe('classifyReadOutput', () => {
  it('keeps the declared class for ordinary output', () => {
    for (const declared of DATA_CLASSES) {
      expect(classifyReadOutput('{"service":"api","healthy":true}', declared)).toStrictEqual({
        data_class: declared,
        raised_by: [],
      });
    }
  });

  it('raises credential-like output to secret, whatever was declared', () => {
    for (const declared of DATA_CLASSES) {
      expect(classifyReadOutput(`key=${AWS_KEY}`, declared)).toStrictEqual({
        data_class: 'secret',
        raised_by: ['credential_like_text'],
      });
    }
  });

  it('raises a secret quoted or escaped inside a JSON string, as a model reads it, to secret', () => {
    for (const output of [
      JSON.stringify({ body: JSON.stringify({ client_secret: 'q8Zt3xV9mK2pL7wR4nB6yH1cF5dJ0sGa' }) }),
      JSON.stringify({ config: 'password = "hunter2hunter2x"' }),
      '{"key":"\\u0041KIA2E0A8F3B244C9986"}',
    ]) {
      expect(classifyReadOutput(output, 'internal'), output).toStrictEqual({
        data_class: 'secret',
        raised_by: ['credential_like_text'],
      });
    }
  });

  it('raises output whose strings two levels deep could not be scanned to secret', () => {
    // A base64-like run split by an escaped slash: `\\\/` in the text, `\/` one string deep,
    // one run longer than any segment the scanner decodes only two strings deep.
    const half = 'A'.repeat(SIGNAL_LIMITS.maxSegmentChars / 2 + 1);
    const inner = `{"wrapped":"${half}\\/${half}"}`;
    const twoDeep = JSON.stringify({ text: inner });
    expect(twoDeep).toContain(`${half}\\\\/${half}`);
    expect(classifyReadOutput(twoDeep, 'public')).toStrictEqual({
      data_class: 'secret',
      raised_by: ['unscanned_content'],
    });
    // The same two runs split by a space at every level: scanned whole, nothing raised.
    const spaced = JSON.stringify({ text: `{"wrapped":"${half} ${half}"}` });
    expect(classifyReadOutput(spaced, 'public')).toStrictEqual({ data_class: 'public', raised_by: [] });
  });

  it('raises output the scanner could not read completely to secret (padding buys nothing)', () => {
    const padded = `${'a'.repeat(SIGNAL_LIMITS.maxScanChars)} ${AWS_KEY}`;
    expect(classifyReadOutput(padded, 'public')).toStrictEqual({
      data_class: 'secret',
      // The redactor's reading is not truncated: it locates the key past the scanner's bound.
      raised_by: ['credential_like_text', 'unscanned_content'],
    });
    const paddedOnly = `${'a'.repeat(SIGNAL_LIMITS.maxScanChars)} nothing else`;
    expect(classifyReadOutput(paddedOnly, 'public')).toStrictEqual({
      data_class: 'secret',
      raised_by: ['unscanned_content'],
    });
  });

  it('raises a key ended by a soft hyphen and a letter inside base64 to secret (writ-signals/5 reading)', () => {
    // The redactor does not decode base64, and the writ-signals/2 rules read the decoded text with
    // the soft hyphen removed (a 17-character token): only reading it as written finds the key.
    const blob = Buffer.from(`rolled back by ${AWS_KEY}\u00adb at 12:00`, 'utf8').toString('base64');
    expect(classifyReadOutput(`blob: ${blob}`, 'public')).toStrictEqual({
      data_class: 'secret',
      raised_by: ['credential_like_text'],
    });
    // Base64 of ordinary text stays at the declared class.
    const plain = Buffer.from('rolled back by nothing at 12:00', 'utf8').toString('base64');
    expect(classifyReadOutput(`blob: ${plain}`, 'public')).toStrictEqual({
      data_class: 'public',
      raised_by: [],
    });
  });
});

describe('evaluateEgress', () => {
  it('allows a message within its destination’s class', () => {
    expect(decide(send('slack:acme/ops', ['internal', 'confidential']))).toStrictEqual({
      decision: 'allowed',
      violations: [],
      data_class: 'confidential',
      max_class: 'confidential',
    });
    expect(decide(send('email:example.org', [])).decision).toBe('allowed');
  });

  it('denies a message whose most sensitive source exceeds the destination', () => {
    const d = decide(send('email:acme.com', ['public', 'confidential']));
    expect(d).toStrictEqual({
      decision: 'denied',
      violations: ['egress_class_exceeded'],
      data_class: 'confidential',
      max_class: 'internal',
    });
  });

  it('classifies the text itself: a credential pasted into the message is secret even with no source', () => {
    const d = decide(send('slack:acme/ops', [], `here is the key ${AWS_KEY}`));
    expect(d.violations).toStrictEqual(['egress_class_exceeded']);
    expect(d.data_class).toBe('secret');
  });

  it('denies an unknown destination (default deny), whatever the class', () => {
    for (const classes of [[], ['public']] as DataClass[][]) {
      expect(decide(send('email:attacker.example', classes))).toStrictEqual({
        decision: 'denied',
        violations: ['egress_destination_not_allowed'],
        data_class: 'public',
        max_class: null,
      });
    }
  });

  it('a destination named twice takes its strictest maximum', () => {
    const policy = {
      destinations: [...POLICY.destinations, { destination: 'slack:acme/ops', max_class: 'public' }],
    };
    expect(decide(send('slack:acme/ops', ['internal']), policy).violations).toStrictEqual([
      'egress_class_exceeded',
    ]);
  });

  it('refuses malformed policies and requests ("cannot evaluate")', () => {
    const bad: [unknown, unknown, string][] = [
      [{ destinations: [], extra: 1 }, send('email:acme.com', []), 'invalid_policy'],
      [{ destinations: [{ destination: 'x', max_class: 'top-secret' }] }, send('x', []), 'invalid_policy'],
      [POLICY, { ...send('email:acme.com', []), note: 'x' }, 'invalid_request'],
      [POLICY, send('email:acme.com', ['restricted' as DataClass]), 'invalid_request'],
      [
        POLICY,
        {
          ...send('email:acme.com', ['public']),
          sources: [{ receipt_sha256: 'nope', data_class: 'public' }],
        },
        'invalid_request',
      ],
      [POLICY, { destination: 'email:acme.com', sources: [] }, 'invalid_request'],
      [POLICY, null, 'invalid_request'],
    ];
    for (const [policy, request, reason] of bad) {
      const r = evaluateEgress(policy, request);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.reason).toBe(reason);
    }
  });

  it('monotonic: raising a source class or dropping a destination never turns a denial into an allowance', () => {
    const cls = fc.constantFrom(...DATA_CLASSES);
    const dest = fc.constantFrom(
      'slack:acme/ops',
      'email:acme.com',
      'email:example.org',
      'email:other.example',
    );
    fc.assert(
      fc.property(
        dest,
        fc.array(cls, { maxLength: 4 }),
        fc.nat(3),
        cls,
        fc.nat(2),
        (d, classes, i, raised, drop) => {
          const before = decide(send(d, classes));
          const higher = [...classes];
          if (higher.length > 0) {
            const at = i % higher.length;
            const current = higher[at] as DataClass;
            if (DATA_CLASSES.indexOf(raised) >= DATA_CLASSES.indexOf(current)) higher[at] = raised;
          }
          const after = decide(send(d, higher));
          if (before.decision === 'denied') expect(after.decision).toBe('denied');
          const narrowed = { destinations: POLICY.destinations.filter((_, k) => k !== drop) };
          if (before.decision === 'denied')
            expect(decide(send(d, classes), narrowed).decision).toBe('denied');
        },
      ),
      { seed: 0xe9, numRuns: 500 },
    );
  });
});
