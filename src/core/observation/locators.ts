/**
 * Typed locators checked against the acquired artifact (spec ch. 12, "Locators make evidence
 * inspectable").
 *
 * Guarantees: the locator list is bounded in count and per-locator canonical bytes, has no two
 * locators with the same id or the same target, and every locator that can be checked against
 * what was acquired is: a JSON Pointer resolves in the JSON payload, a source span lies inside the
 * payload on UTF-8 character boundaries and names exactly the lines it covers, an image region
 * lies inside the decoded image, a media time range inside the decoded duration, a log event's
 * time range is ordered and not after acquisition. A locator of a kind the content cannot have
 * (a JSON Pointer into an image) is rejected, not ignored.
 * Never: parses a payload (the caller passes the already-bounded parse), follows a pointer through
 * a prototype, reads a clock, or does I/O.
 */
import { canonicalize } from '../canonical/canonical.js';
import { resolvePointer } from '../contracts/contract.js';
import type { JsonValue } from '../canonical/json.js';
import { utf8ByteLength } from '../canonical/json.js';
import type {
  ArtifactReference,
  Locator,
  ObservationPolicy,
  ObservationViolation,
  Region,
} from './schema.js';

/** What a locator is checked against. */
export type LocatorTarget =
  | {
      readonly kind: 'inline';
      readonly bytes: Uint8Array;
      /** `true` when the media type is JSON; `json` is then the parsed payload, or `undefined` if it did not parse. */
      readonly isJson: boolean;
      readonly json: JsonValue | undefined;
    }
  | { readonly kind: 'artifact'; readonly artifact: ArtifactReference };

/**
 * Check `locators` against the policy's bounds and against `target`. `target` is `null` when the
 * content could not be examined (over its byte bound): bounds and uniqueness are still checked.
 */
export function checkLocators(
  locators: readonly Locator[],
  policy: ObservationPolicy,
  target: LocatorTarget | null,
  observedAt: number,
): ObservationViolation[] {
  const v = new Set<ObservationViolation>();
  // Unbounded locator lists are a resource attack on every consumer that restores them.
  if (locators.length > policy.max_locators) v.add('too_many_locators');
  // Evidence without a location invites whole-document authority.
  if (policy.require_locator && locators.length === 0) v.add('locator_missing');

  const ids = new Set<string>();
  const targets = new Set<string>();
  const lines =
    target?.kind === 'inline' && locators.some((l) => l.kind === 'source_span')
      ? newlineIndex(target.bytes)
      : null;
  for (const locator of locators) {
    const { locator_id, ...where } = locator;
    const key = canonicalize(where);
    // An oversized locator smuggles content into what should be an address.
    if (utf8ByteLength(canonicalize(locator)) > policy.max_locator_bytes) v.add('locator_too_large');
    // Two locators with one id make the citation ambiguous; two ids for one place inflate support.
    if (ids.has(locator_id) || targets.has(key)) v.add('duplicate_locator');
    ids.add(locator_id);
    targets.add(key);
    if (target !== null) for (const x of checkOne(locator, target, lines, observedAt)) v.add(x);
  }
  return [...v].sort();
}

function checkOne(
  locator: Locator,
  target: LocatorTarget,
  lines: number[] | null,
  observedAt: number,
): ObservationViolation[] {
  switch (locator.kind) {
    case 'json_pointer':
      // A pointer into content that is not JSON cannot be restored.
      if (target.kind !== 'inline' || !target.isJson) return ['locator_kind_mismatch'];
      // A pointer that does not resolve cites something the tool never returned.
      if (target.json === undefined || resolvePointer(target.json, locator.pointer) === undefined) {
        return ['locator_unresolved'];
      }
      return [];
    case 'database_row':
      // Row identity and version come from the source; the payload cannot confirm them.
      return [];
    case 'log_event':
      // An inverted range, or an event after the acquisition that returned it, is not this observation.
      return locator.start_unix_ms > locator.end_unix_ms || locator.end_unix_ms > observedAt
        ? ['locator_out_of_range']
        : [];
    case 'source_span':
      return checkSpan(locator, target, lines);
    case 'image_region': {
      if (target.kind !== 'artifact' || !target.artifact.media_type.startsWith('image/')) {
        return ['locator_kind_mismatch'];
      }
      const media = target.artifact.media;
      // Without decoder-measured dimensions the region cannot be checked or restored.
      if (media === null || media.kind !== 'image') return ['locator_unresolved'];
      const turned = locator.orientation_degrees === 90 || locator.orientation_degrees === 270;
      const w = turned ? media.height_px : media.width_px;
      const h = turned ? media.width_px : media.height_px;
      return inside(locator.region, w, h) ? [] : ['locator_out_of_range'];
    }
    case 'media_time_range': {
      if (target.kind !== 'artifact') return ['locator_kind_mismatch'];
      const a = target.artifact;
      const isAv = a.media_type.startsWith('audio/') || a.media_type.startsWith('video/');
      if (!isAv) return ['locator_kind_mismatch'];
      const media = a.media;
      if (media === null || media.kind === 'image') return ['locator_unresolved'];
      // A frame region exists only on video.
      if (locator.frame_region !== null && media.kind !== 'video') return ['locator_kind_mismatch'];
      if (locator.start_ms >= locator.end_ms || locator.end_ms > media.duration_ms)
        return ['locator_out_of_range'];
      if (
        locator.frame_region !== null &&
        media.kind === 'video' &&
        !inside(locator.frame_region, media.width_px, media.height_px)
      ) {
        return ['locator_out_of_range'];
      }
      return [];
    }
  }
}

function inside(r: Region, width: number, height: number): boolean {
  return r.x + r.width <= width && r.y + r.height <= height;
}

function checkSpan(
  span: Extract<Locator, { kind: 'source_span' }>,
  target: LocatorTarget,
  lines: number[] | null,
): ObservationViolation[] {
  if (span.byte_start >= span.byte_end || span.line_start > span.line_end) return ['locator_out_of_range'];
  if (target.kind === 'artifact') {
    return span.byte_end <= target.artifact.byte_size ? [] : ['locator_out_of_range'];
  }
  const bytes = target.bytes;
  // A span past the payload cites bytes the tool never returned.
  if (span.byte_end > bytes.length) return ['locator_out_of_range'];
  // A span starting or ending inside a UTF-8 sequence cannot be restored as text.
  if (
    isContinuation(bytes[span.byte_start]) ||
    (span.byte_end < bytes.length && isContinuation(bytes[span.byte_end]))
  ) {
    return ['locator_out_of_range'];
  }
  // The declared lines must be exactly the lines the bytes lie on, or the two halves disagree.
  const idx = lines ?? newlineIndex(bytes);
  if (lineOf(idx, span.byte_start) !== span.line_start || lineOf(idx, span.byte_end - 1) !== span.line_end) {
    return ['locator_out_of_range'];
  }
  return [];
}

function isContinuation(b: number | undefined): boolean {
  return b !== undefined && (b & 0xc0) === 0x80;
}

/** Byte offsets of every `\n`, ascending. */
function newlineIndex(bytes: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0a) out.push(i);
  return out;
}

/** 1-based line of the byte at `offset`: one more than the newlines strictly before it (binary search). */
function lineOf(newlines: readonly number[], offset: number): number {
  let lo = 0;
  let hi = newlines.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((newlines[mid] as number) < offset) lo = mid + 1;
    else hi = mid;
  }
  return lo + 1;
}
