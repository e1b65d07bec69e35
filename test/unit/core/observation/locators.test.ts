// Typed locators: bounds, uniqueness, and each kind checked against the acquired artifact.
import { describe, expect, it } from 'vitest';
import { utf8Encode } from '../../../../src/core/canonical/json.js';
import { checkLocators, type LocatorTarget } from '../../../../src/core/observation/locators.js';
import { LAB_OBSERVATION_POLICY } from '../../../../src/lab/observations.js';
import {
  Locator,
  type ArtifactReference,
  type ObservationPolicy,
} from '../../../../src/core/observation/schema.js';
import { baseInput, rebind, violationsOf } from './fixtures.js';

const policy: ObservationPolicy = { ...LAB_OBSERVATION_POLICY, require_locator: false };
const OBSERVED = 1_000_000;
const TEXT = 'line one\nline two: caf\u00e9\nline three\n';
const inline = (text: string, json = false): LocatorTarget => {
  let parsed;
  if (json) parsed = JSON.parse(text) as never;
  return { kind: 'inline', bytes: utf8Encode(text), isJson: json, json: parsed };
};
const artifact = (a: Partial<ArtifactReference>): LocatorTarget => ({
  kind: 'artifact',
  artifact: {
    artifact_sha256: 'a'.repeat(64),
    byte_size: 1000,
    media_type: 'image/png',
    storage_tenant_id: 'acme',
    decoder_release: 'png-decoder 1.0',
    media: { kind: 'image', width_px: 640, height_px: 480 },
    ...a,
  },
});
const check = (locators: Locator[], target: LocatorTarget | null, p: ObservationPolicy = policy) =>
  checkLocators(locators, p, target, OBSERVED);

const span = (byte_start: number, byte_end: number, line_start: number, line_end: number): Locator => ({
  kind: 'source_span',
  locator_id: 'span',
  byte_start,
  byte_end,
  line_start,
  line_end,
});
const pointer = (p: string, id = 'ptr'): Locator => ({
  kind: 'json_pointer',
  locator_id: id,
  pointer: p,
  source_snapshot: 'etag:"42"',
});

describe('bounds and uniqueness', () => {
  it('accepts exactly max_locators and rejects one more', () => {
    const many = (n: number) => Array.from({ length: n }, (_, k) => pointer(`/items/${k}`, `p${k}`));
    const target = inline(JSON.stringify({ items: Array.from({ length: 20 }, (_, k) => k) }), true);
    expect(check(many(policy.max_locators), target)).toEqual([]);
    expect(check(many(policy.max_locators + 1), target)).toEqual(['too_many_locators']);
  });

  it('requires a locator when the policy does', () => {
    expect(check([], null, { ...policy, require_locator: true })).toEqual(['locator_missing']);
    expect(check([], null)).toEqual([]);
  });

  it('bounds the canonical bytes of each locator', () => {
    const db = (value: string): Locator => ({
      kind: 'database_row',
      locator_id: 'row',
      database: 'deploys',
      table: 'rollouts',
      primary_key: { id: value },
      row_version: 'xmin:991',
    });
    const size = (l: Locator) => utf8Encode(JSON.stringify(l)).length;
    const fits = db('x'.repeat(policy.max_locator_bytes - size(db(''))));
    expect(size(fits)).toBe(policy.max_locator_bytes);
    expect(check([fits], null)).toEqual([]);
    expect(check([db('x'.repeat(policy.max_locator_bytes - size(db('')) + 1))], null)).toEqual([
      'locator_too_large',
    ]);
  });

  it('rejects duplicate ids and duplicate targets', () => {
    const t = inline('{"a":1,"b":2}', true);
    expect(check([pointer('/a', 'x'), pointer('/b', 'x')], t)).toEqual(['duplicate_locator']);
    expect(check([pointer('/a', 'x'), pointer('/a', 'y')], t)).toEqual(['duplicate_locator']);
    expect(check([pointer('/a', 'x'), pointer('/b', 'y')], t)).toEqual([]);
  });

  it('still checks bounds when the content could not be examined', () => {
    expect(check([pointer('/nowhere', 'a'), pointer('/nowhere', 'a')], null)).toEqual(['duplicate_locator']);
  });
});

describe('json_pointer', () => {
  const doc = inline('{"deployments":[{"status":"rolled_back","a/b":{"~":true}}]}', true);
  it('must resolve in the JSON payload', () => {
    expect(check([pointer('/deployments/0/status')], doc)).toEqual([]);
    expect(check([pointer('/deployments/0/a~1b/~0')], doc)).toEqual([]);
    expect(check([pointer('/deployments/1/status')], doc)).toEqual(['locator_unresolved']);
    expect(check([pointer('/deployments/00')], doc)).toEqual(['locator_unresolved']);
  });
  it('never walks into the prototype', () => {
    expect(check([pointer('/deployments/0/constructor')], doc)).toEqual(['locator_unresolved']);
    expect(check([pointer('/deployments/length')], doc)).toEqual(['locator_unresolved']);
  });
  it('cannot point into non-JSON content', () => {
    expect(check([pointer('/a')], inline('plain text'))).toEqual(['locator_kind_mismatch']);
    expect(check([pointer('/a')], artifact({}))).toEqual(['locator_kind_mismatch']);
  });
  it('is not restorable from a JSON payload that did not parse', () => {
    expect(
      check([pointer('/a')], { kind: 'inline', bytes: utf8Encode('{'), isJson: true, json: undefined }),
    ).toEqual(['locator_unresolved']);
  });
  it('must be non-empty: a locator names a part, not the whole document', () => {
    expect(Locator.safeParse(pointer('')).success).toBe(false);
  });
});

describe('source_span', () => {
  const t = inline(TEXT);
  const total = utf8Encode(TEXT).length;
  it('accepts a span ending exactly at the payload end, with its exact lines', () => {
    expect(check([span(0, 8, 1, 1)], t)).toEqual([]);
    expect(check([span(9, total, 2, 3)], t)).toEqual([]);
  });
  it('rejects a span one byte past the end', () => {
    expect(check([span(9, total + 1, 2, 3)], t)).toEqual(['locator_out_of_range']);
  });
  it('rejects a span that starts or ends inside a UTF-8 sequence', () => {
    const e = utf8Encode(TEXT).indexOf(0xc3);
    expect(check([span(9, e + 1, 2, 2)], t)).toEqual(['locator_out_of_range']);
    expect(check([span(e + 1, e + 3, 2, 2)], t)).toEqual(['locator_out_of_range']);
    expect(check([span(9, e + 2, 2, 2)], t)).toEqual([]);
  });
  it('rejects lines that disagree with the bytes', () => {
    expect(check([span(0, 8, 2, 2)], t)).toEqual(['locator_out_of_range']);
    expect(check([span(0, 12, 1, 1)], t)).toEqual(['locator_out_of_range']);
  });
  it('rejects empty and inverted spans', () => {
    expect(check([span(5, 5, 1, 1)], t)).toEqual(['locator_out_of_range']);
    expect(check([span(6, 5, 1, 1)], t)).toEqual(['locator_out_of_range']);
  });
  it('checks byte ranges of an artifact against its size', () => {
    expect(check([span(0, 1000, 1, 9)], artifact({}))).toEqual([]);
    expect(check([span(0, 1001, 1, 9)], artifact({}))).toEqual(['locator_out_of_range']);
  });
});

describe('log_event and database_row', () => {
  const log = (start: number, end: number): Locator => ({
    kind: 'log_event',
    locator_id: 'evt',
    log_stream: 'rollouts/api',
    event_id: '01JD2K',
    start_unix_ms: start,
    end_unix_ms: end,
  });
  it('a log event range is ordered and not after acquisition', () => {
    expect(check([log(OBSERVED - 10, OBSERVED)], inline('x'))).toEqual([]);
    expect(check([log(OBSERVED - 10, OBSERVED + 1)], inline('x'))).toEqual(['locator_out_of_range']);
    expect(check([log(OBSERVED, OBSERVED - 1)], inline('x'))).toEqual(['locator_out_of_range']);
  });
  it('a database row names its key and row version', () => {
    const row: Locator = {
      kind: 'database_row',
      locator_id: 'row',
      database: 'deploys',
      table: 'rollouts',
      primary_key: { id: '41' },
      row_version: 'xmin:991',
    };
    expect(check([row], inline('x'))).toEqual([]);
    expect(Locator.safeParse({ ...row, primary_key: {} }).success).toBe(false);
    expect(Locator.safeParse({ ...row, row_version: '' }).success).toBe(false);
  });
});

describe('image_region', () => {
  const region = (
    x: number,
    y: number,
    width: number,
    height: number,
    orientation_degrees: 0 | 90 = 0,
  ): Locator => ({
    kind: 'image_region',
    locator_id: 'r',
    region: { x, y, width, height },
    orientation_degrees,
    map_id: 'page-1',
  });
  it('lies inside the decoded image, boundary included', () => {
    expect(check([region(0, 0, 640, 480)], artifact({}))).toEqual([]);
    expect(check([region(1, 0, 640, 480)], artifact({}))).toEqual(['locator_out_of_range']);
    expect(check([region(0, 0, 640, 481)], artifact({}))).toEqual(['locator_out_of_range']);
  });
  it('swaps width and height for a quarter turn', () => {
    expect(check([region(0, 0, 480, 640, 90)], artifact({}))).toEqual([]);
    expect(check([region(0, 0, 640, 480, 90)], artifact({}))).toEqual(['locator_out_of_range']);
  });
  it('needs an image with decoder-measured dimensions', () => {
    expect(check([region(0, 0, 1, 1)], inline('x'))).toEqual(['locator_kind_mismatch']);
    expect(check([region(0, 0, 1, 1)], artifact({ media_type: 'audio/wav' }))).toEqual([
      'locator_kind_mismatch',
    ]);
    expect(check([region(0, 0, 1, 1)], artifact({ media: null }))).toEqual(['locator_unresolved']);
  });
});

describe('media_time_range', () => {
  const range = (
    start_ms: number,
    end_ms: number,
    frame: null | { x: number; y: number; width: number; height: number } = null,
  ): Locator => ({
    kind: 'media_time_range',
    locator_id: 't',
    track: 'audio-0',
    start_ms,
    end_ms,
    frame_region: frame,
  });
  const audio = artifact({ media_type: 'audio/ogg', media: { kind: 'audio', duration_ms: 60_000 } });
  const video = artifact({
    media_type: 'video/mp4',
    media: { kind: 'video', duration_ms: 10_000, width_px: 1920, height_px: 1080 },
  });
  it('lies inside the decoded duration', () => {
    expect(check([range(0, 60_000)], audio)).toEqual([]);
    expect(check([range(0, 60_001)], audio)).toEqual(['locator_out_of_range']);
    expect(check([range(10, 10)], audio)).toEqual(['locator_out_of_range']);
  });
  it('a frame region exists only on video, inside the frame', () => {
    expect(check([range(0, 1000, { x: 0, y: 0, width: 1920, height: 1080 })], video)).toEqual([]);
    expect(check([range(0, 1000, { x: 1, y: 0, width: 1920, height: 1080 })], video)).toEqual([
      'locator_out_of_range',
    ]);
    expect(check([range(0, 1000, { x: 0, y: 0, width: 1, height: 1 })], audio)).toEqual([
      'locator_kind_mismatch',
    ]);
  });
  it('is not a locator into text or an image', () => {
    expect(check([range(0, 1)], inline('x'))).toEqual(['locator_kind_mismatch']);
    expect(check([range(0, 1)], artifact({}))).toEqual(['locator_kind_mismatch']);
  });
});

describe('through validateObservation', () => {
  it('rejects a pointer the payload does not have', () => {
    const i = baseInput();
    i.observation.locators = [
      { kind: 'json_pointer', locator_id: 'x', pointer: '/approved', source_snapshot: 's' },
    ];
    expect(violationsOf(i)).toEqual(['locator_unresolved']);
  });
  it('accepts a source span over the exact payload', () => {
    const payload = '{"status":"rolled_back"}\n{"status":"healthy"}\n';
    const i = rebind(baseInput(), {
      payload,
      mediaType: 'text/plain',
      locators: [span(0, 24, 1, 1), { ...span(25, 45, 2, 2), locator_id: 'second' }],
    });
    expect(violationsOf(i)).toEqual([]);
  });
});
