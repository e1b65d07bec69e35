/**
 * Review 14: `classifyReadOutput` raised output to `secret` for a credential the redactor locates
 * (`credentialSpansAsRead`) only when the text held a quote. The detector reads a text with
 * invisible characters removed (its `cased` view), the redactor reads it as written: an AWS key
 * followed by a soft hyphen and a letter is a whole key to the redactor (the soft hyphen ends
 * it), and a 21-character run to the detector (no key). Output without a quote that the redactor
 * would redact was classified as declared (`public`), and could be sent anywhere.
 */
import { describe, expect, it } from 'vitest';
import { credentialSpans, detectSignals } from '../../../src/core/observation/signals.js';
import { classifyReadOutput } from '../../../src/library/egress.js';

const AWS_KEY = 'AKIA2E0A8F3B244C9986';

describe('classifyReadOutput of text without a quote', () => {
  it('raises to secret a credential the redactor locates, however the detector reads it', () => {
    const text = `deploy id ${AWS_KEY}\u00adB done`;
    // The premise: the redactor locates the key; the detector raises no credential signal.
    expect(credentialSpans(text).map((s) => text.slice(s.start, s.end))).toEqual([AWS_KEY]);
    expect(detectSignals(text).signals).not.toContain('credential_like_text');
    expect(classifyReadOutput(text, 'public')).toStrictEqual({
      data_class: 'secret',
      raised_by: ['credential_like_text'],
    });
    // The same text quoted (JSON) was raised already, through the redactor's reading.
    expect(classifyReadOutput(JSON.stringify({ text }), 'public').data_class).toBe('secret');
  });

  it('leaves text with no credential at its declared class', () => {
    expect(classifyReadOutput(`deploy id AKIA-not-a-key\u00adB done`, 'internal')).toStrictEqual({
      data_class: 'internal',
      raised_by: [],
    });
  });
});
