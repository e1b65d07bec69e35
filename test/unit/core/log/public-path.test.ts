/**
 * The public log path parser (src/core/log/public-path.ts): the C2SP tlog-tiles resources under
 * `/log/<tenant_id>/` and nothing else, one spelling each, bounded before anything is split.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_PUBLIC_LOG_PATH, parsePublicLogPath } from '../../../../src/core/log/public-path.js';
import { entryBundlePath, tilePath } from '../../../../src/core/log/tiles.js';

const T = 'ten-abc123';

describe('parsePublicLogPath', () => {
  it('accepts the checkpoint, tiles and entry bundles at their C2SP paths', () => {
    expect(parsePublicLogPath(`/log/${T}/checkpoint`)).toEqual({ tenant_id: T, kind: 'checkpoint' });
    for (const path of ['tile/0/000', 'tile/0/x001/234.p/7', 'tile/63/999', 'tile/entries/000.p/255']) {
      expect(parsePublicLogPath(`/log/${T}/${path}`)).toEqual({ tenant_id: T, kind: 'tile', path });
    }
  });

  it.each([
    ['no tenant', '/log//checkpoint'],
    ['no resource', `/log/${T}`],
    ['empty resource', `/log/${T}/`],
    ['another prefix', `/v1/log/${T}/checkpoint`],
    ['trailing slash', `/log/${T}/checkpoint/`],
    ['case', `/log/${T}/Checkpoint`],
    ['a second spelling of a tile (short index)', `/log/${T}/tile/0/0`],
    ['a leading x000 element', `/log/${T}/tile/0/x000/001`],
    ['a level with a leading zero', `/log/${T}/tile/00/000`],
    ['level 64', `/log/${T}/tile/64/000`],
    ['width 0', `/log/${T}/tile/0/000.p/0`],
    ['width 256 (a full tile has no suffix)', `/log/${T}/tile/entries/000.p/256`],
    ['the tile directory', `/log/${T}/tile/`],
    ['a percent-escape in the tenant', '/log/ten%2Fx/checkpoint'],
    ['a percent-escape in the resource', `/log/${T}/tile/0/%30%30%30`],
    ['a dot step as tenant', '/log/../checkpoint'],
    ['a plus (no note key name can hold it)', '/log/ten+x/checkpoint'],
    ['a tenant of 129 characters', `/log/${'a'.repeat(129)}/checkpoint`],
    ['the path bound', `/log/${T}/tile/0/${'x001/'.repeat(40)}000`],
    ['a query (a second cache key)', `/log/${T}/checkpoint?v=1`],
    ['a bare query mark', `/log/${T}/tile/0/000?`],
  ])('refuses %s', (_why, path) => {
    expect(parsePublicLogPath(path)).toBeNull();
  });

  it('refuses any path longer than the bound before splitting it', () => {
    expect(parsePublicLogPath(`/log/${T}/checkpoint`.padEnd(MAX_PUBLIC_LOG_PATH + 1, 'x'))).toBeNull();
    expect(parsePublicLogPath('/log/' + 'a/'.repeat(100_000))).toBeNull();
  });

  it('every tile and bundle path the sequencer writes, for any minted-style tenant id, parses back to itself', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@=-]{0,127}$/),
        fc.integer({ min: 0, max: 63 }),
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: 1, max: 256 }),
        fc.boolean(),
        (tenant_id, level, index, width, entries) => {
          const path = entries ? entryBundlePath(index, width) : tilePath({ level, index, width });
          expect(parsePublicLogPath(`/log/${tenant_id}/${path}`)).toEqual({ tenant_id, kind: 'tile', path });
          expect(parsePublicLogPath(`/log/${tenant_id}/checkpoint`)).toEqual({
            tenant_id,
            kind: 'checkpoint',
          });
        },
      ),
    );
  });

  it('never throws, and anything it accepts names the tenant and resource it was given', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        const r = parsePublicLogPath(s);
        if (r === null) return;
        const resource = r.kind === 'checkpoint' ? 'checkpoint' : r.path;
        expect(`/log/${r.tenant_id}/${resource}`).toBe(s);
      }),
    );
  });
});
