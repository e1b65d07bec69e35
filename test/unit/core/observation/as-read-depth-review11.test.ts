// Review 11: the version 4 scan reads JSON strings one level deep (`jsonStringsAsRead`), while the
// `writ-redactor/3` redactor reads `AS_READ_DEPTH` (4) levels. A credential in JSON text held in a
// string of JSON text held in a string was redacted, yet raised no signal in a version 4 receipt.
// Fixed by observation receipt version 5 (`writ-signals/4`), which scans the levels the redactor
// reads; version 4 receipts replay as issued, so version 4 still does not flag it. The egress
// classification reads as deep as the redactor since review 11.
import { describe, expect, it } from 'vitest';
import {
  credentialSpansAsRead,
  scanContentUnder,
} from '../../../../src/core/observation/signals/releases.js';
import { classifyReadOutput } from '../../../../src/library/egress.js';

const SECRET = 'Zx9qL2mN8vB4rT6yW1eK';
const inner = JSON.stringify({ client_secret: SECRET });
const twoDeep = JSON.stringify({ text: JSON.stringify({ wrapped: inner }) });

describe('a credential two JSON strings deep', () => {
  it('is located by the writ-redactor/3 rules', () => {
    const spans = credentialSpansAsRead(twoDeep, 'application/json');
    expect(spans.map((s) => twoDeep.slice(s.start, s.end))).toEqual([SECRET]);
  });

  it('raises credential_like_text in a version 5 scan, as the redactor finds it', () => {
    expect(scanContentUnder(5, twoDeep, 'application/json').signals).toContain('credential_like_text');
  });

  it('raises no signal in a version 4 scan: version 4 receipts replay as they were issued', () => {
    expect(scanContentUnder(4, twoDeep, 'application/json').signals).toEqual([]);
  });

  it('raises read output to secret', () => {
    expect(classifyReadOutput(twoDeep, 'internal').data_class).toBe('secret');
  });
});
