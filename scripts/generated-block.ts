// Generated blocks in Markdown docs: the text between `<!-- TOOL:NAME:begin -->` and
// `<!-- TOOL:NAME:end -->` is written by a tool (the bench table, the mutation report) and checked
// by a unit test. One implementation for every tool that owns such blocks.

export interface GeneratedBlocks {
  begin(name: string): string;
  end(name: string): string;
  /** The text between a block's markers (markers excluded, trimmed), or undefined without both markers. */
  extract(text: string, name: string): string | undefined;
  /** `text` with the block between its markers replaced by `body`; throws without both markers. */
  replace(text: string, name: string, body: string): string;
}

export function generatedBlocks(tool: string): GeneratedBlocks {
  const begin = (name: string) => `<!-- ${tool}:${name}:begin -->`;
  const end = (name: string) => `<!-- ${tool}:${name}:end -->`;
  return {
    begin,
    end,
    extract(text, name) {
      const b = text.indexOf(begin(name));
      const e = text.indexOf(end(name));
      if (b < 0 || e < b) return undefined;
      return text.slice(b + begin(name).length, e).trim();
    },
    replace(text, name, body) {
      const b = text.indexOf(begin(name));
      const e = text.indexOf(end(name));
      if (b < 0 || e < b) throw new Error(`no ${begin(name)} … ${end(name)} markers`);
      if (text.indexOf(begin(name), b + 1) >= 0) throw new Error(`${begin(name)} appears twice`);
      return `${text.slice(0, b + begin(name).length)}\n${body}\n${text.slice(e)}`;
    },
  };
}
