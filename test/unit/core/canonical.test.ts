import { describe, it, expect } from 'vitest';
import { canonicalize } from '../../../src/core/canonical.js';
describe('smoke', () => { it('runs', () => { expect(canonicalize({ b: 1, a: 2 })).toBe('{"a":2,"b":1}'); }); });
