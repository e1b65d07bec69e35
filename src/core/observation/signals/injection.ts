/**
 * Instruction-like and authority-claim rules: families of prompt-injection wording, in English
 * and in the major languages of the agents' users, plus control-plane shapes (role, approval,
 * tool-call structures) and hidden characters.
 *
 * Guarantees: every pattern starts with a literal alternation or a one-character class and its
 * quantifiers are fixed or bounded by a small constant (gaps of at most a few words or a few dozen
 * characters), so a scan does constant work per start position; language rules for a script run
 * only when a character of that script occurs. A rule id names its family (`instruction.override`,
 * `instruction.delimiter_forgery`, ...); the language is in the rule's `lang`, never in the id, so
 * the ids a receipt carries stay few and stable.
 * Never: matches on a single common word, or treats a match as proof of intent.
 */
import { normalizedPattern, type Rule } from './rule.js';

// ---------------------------------------------------------------------------------------------
// English, on the `words` view (letters and digits, single spaces) unless stated.

const W = '(?:[a-z0-9]+ )'; // one word of a bounded gap

const OVERRIDE_VERBS =
  '(?:ignore|ignoring|ingore|igore|ignor|ignroe|disregard|disregarding|disreguard|dissregard|forget|forgetting|forgt|foget|skip|neglect|overlook|discard|dismiss|abandon|drop|scrap|set aside|stop following|do not follow|dont follow|don t follow|no longer follow|cease following|pay no attention to)';
/** Determiners and qualifiers that make "rules", "commands", "context" refer to the model's own. */
const OVERRIDE_DET = '(?:all|any|the|your|my|these|those|every|each|of|this|that|whatever|everything)';
const OVERRIDE_ADJ =
  '(?:previous|prior|above|earlier|preceding|former|original|initial|old|current|existing|given|aforementioned|foregoing|system|safety|ethical|content|developer|moderation|security|other|standard|usual|default|built in|programmed|pre existing|preexisting|stated|said|provided|supplied|prior)';
/** Nouns that only count with a determiner or qualifier ("ignore json rules" is linter talk). */
const OVERRIDE_TARGETS =
  '(?:instructions?|instrucions|instuctions|prompts?|rules?|directions?|guidelines?|guardrails?|orders?|commands?|directives?|constraints?|restrictions?|limitations?|programming|training|polic(?:y|ies)|filters?|context|info|information|questions?|requests?|query|queries|input|content|assignments?|tasks?|text|conversation|articles?|documents?|sources?|passages?)';
/** Targets that are the model's own whatever precedes them. */
const OVERRIDE_STRONG_TARGETS =
  '(?:instructions?|instrucions|instuctions|directives?|guardrails?|programming|above|everything|anything|all info|all information|what (?:i|you) (?:said|wrote|were told|have been told|was told)|my question|the question|this question|all the assignments|all assignments|all (?:the |your |previous |prior )?tasks|wh?a?t s before|waht s before|what (?:came|comes|is|was) (?:before|above))';

const EN: readonly Omit<Rule, 'signal'>[] = [
  {
    // "ignore previous instructions" and its spaced, dotted, zero-width and leetspeak spellings.
    id: 'instruction.override',
    family: 'override',
    view: 'squeezed',
    pattern:
      /(?:ignore|disregard|forget|override|bypass)[a-z0-9]{0,24}?(?:previous|prior|preceding|above|earlier|original|initial|existing|system|developer|safety|security)[a-z0-9]{0,24}?(?:instruction|prompt|message|rule|direction|guideline|guardrail|polic|context|constraint|command|order)/,
  },
  {
    // "ignore the above and ...", "disregard all info except ...", "forget those rules", misspelled verbs.
    id: 'instruction.override',
    family: 'override',
    view: 'words',
    pattern: new RegExp(
      ` ${OVERRIDE_VERBS} (?:about )?(?:(?:${OVERRIDE_DET} ){1,3}(?:${OVERRIDE_ADJ} ){0,2}|(?:${OVERRIDE_ADJ} ){1,2})${OVERRIDE_TARGETS} | ${OVERRIDE_VERBS} (?:about )?${W}{0,3}?${OVERRIDE_STRONG_TARGETS} `,
    ),
  },
  {
    // Goal replacement: "instead, output ...", "your new task is", "don't answer the question, just say".
    id: 'instruction.override',
    family: 'override',
    view: 'words',
    pattern:
      / (?:your (?:new|real|actual|true|only|next) (?:instructions|task|goal|objective|purpose|orders|job|mission) (?:is|are|will be)|(?:new|updated|revised|real|actual|hidden|secret) (?:system|developer) (?:instructions|prompt|directives|message)|(?:new|real|actual|hidden|secret) instructions (?:for|to) (?:the |all |any )?(?:ai|assistant|agent|model|llm)s?|(?:do not|don t|dont|never) (?:answer|respond to|reply to|address) (?:the|this|that|my|any|their) (?:question|query|request|prompt)|(?:just|only|simply|directly) (?:output|print|say|repeat|write|reply|respond|answer|return|type)(?: with| the following| exactly| this)?|(?:output|print|say|repeat|reply|respond|answer|write) (?:directly|only|exactly|verbatim|simply)|stop (?:what you are doing|everything|your current task)|instead (?:of (?:answering|responding|summarizing|translating|doing)|you (?:should|must|will|need to))|(?:from now on|starting now|henceforth) (?:you (?:will|must|shall|should|are|only)|your|respond|answer|reply|only)|(?:respond|reply|answer|speak|talk|write|act|behave) (?:[a-z]+ ){0,5}?from now on|regardless of (?:any |all |your |the |my )?(?:[a-z]+ ){0,2}?(?:instructions|guidelines|restrictions|rules|input|prompt|programming|constraints)|(?:leave|put|set|remove|clear|wipe|erase|delete|drop|get) (?:all |any )?(?:of )?(?:the |your )?(?:previous|prior|earlier|above|old|former) (?:[a-z]+ )?(?:information|tasks|instructions|context|data|rules|conversation|assignments|orders)|(?:concentrate|focus) (?:only )?on (?:your|the|a|my) new (?:task|assignment|instructions?|goal|objective)|(?:start|begin|proceed|continue) with (?:a|the|your) new (?:task|assignment)|your (?:new )?instructions are (?:now )?(?:to|as follows)|(?:all |the |your )?(?:previous|prior|above|earlier|original) (?:instructions|rules|directives) (?:are|were) (?:false|wrong|invalid|void|cancelled|canceled|obsolete|outdated|revoked|no longer valid)|include (?:the following|this (?:string|text|sentence|link|url|anchor|image|message|phrase|code)|it) (?:[a-z0-9]+ ){0,3}?in your (?:response|answer|output|reply)|include in your (?:response|answer|output|reply) (?:the following|this)|(?:every time|whenever|each time) (?:a |the )?user (?:asks|says|requests|mentions|writes|types) (?:[a-z0-9]+ ){0,8}?(?:reply|respond|answer|say|tell|recommend|output|insist)|(?:append|prepend|repeat) (?:[a-z0-9]+ ){0,6}?(?:to|at the (?:end|start|beginning) of) (?:any|every|all|each|your) (?:output|response|answer|reply|message)s? )/,
  },
  {
    // Forged chat-template, system and admin delimiters inside data, on the punctuation-keeping view.
    id: 'instruction.delimiter_forgery',
    family: 'delimiter_forgery',
    view: 'lower',
    pattern:
      /<\|(?:im_start|im_end|endoftext|system|assistant|user|developer|start_header_id|end_header_id|eot_id)\|>|\[\/?inst\]|<<\/?sys>>|<\/?(?:system|developer|admin|instruction|instructions|system_prompt|system_message|developer_message|user_instructions?|secret_instructions?|hidden_instructions?|important_instructions?|sys|prompt)>|\[(?:system|developer|admin|administrator|root|sudo|operator|assistant|instruction|instructions|override|important instructions?|system override|admin override)(?: (?:message|prompt|note|request|command|update|notice|mode|instructions?|override|access))?(?:\]| ?:)|\b(?:urgent|priority|important|critical|emergency) (?:new )?(?:task|directive)s? ?[:!*]|(?:begin|start|end of|end) (?:system|developer|admin) (?:prompt|message|instructions)|end of (?:system|user) (?:prompt|message|input)|(?:^| )#{2,4} ?(?:system(?: prompt| message)?|instruction|new instructions?|admin) ?:|[*#=%~-]{3} ?(?:new (?:important )?instructions?|(?:end|begin|start) (?:of )?[^*#=%~\n]{0,40}?(?:instructions|prompt|context))|\bnew (?:important )?instructions? ?[*#=%~-]{3}/,
  },
  {
    // A line that opens as a system/admin speaker: "SYSTEM: ...", "ADMIN NOTE: ...".
    id: 'instruction.delimiter_forgery',
    family: 'delimiter_forgery',
    view: 'folded',
    pattern:
      /(?:^|\n)[ \t>*#=\-[(]{0,6}(?:system|sys|admin|administrator|developer|root|sudo|operator|assistant|human)(?:[ _](?:message|prompt|instructions?|note|override|request|command|update|notice|alert|directive|mode))?[ \t\])*]{0,3}:[ \t]{0,3}[^\s\d]/,
  },
  {
    // Role play: "you are now DAN", "pretend to be an AI without rules", "stay in character".
    id: 'instruction.role_play',
    family: 'role_play',
    view: 'words',
    pattern:
      / (?:(?:you are now|you re now|youre now|you will now act as|you will act as|from now on you are|from now on you will be|act as|acting as|pretend to be|pretend you are|pretend that you are|roleplay as|role play as|play the role of|imagine you are|assume the role of|you are going to act as|i want you to act as|i want you to pretend) (?:an? |the |my )?(?:[a-z]+ ){0,3}?(?:system|admin|administrator|root|superuser|developer|dan|stan|dude|aim|jailbroken|jailbreak|unrestricted|unfiltered|evil|uncensored|unethical|amoral|immoral|rogue|hacker|deceased|grandma|grandmother|ai|chatbot|assistant|model|linux terminal|terminal|character)|(?:unrestricted|unfiltered|uncensored|jailbroken|rogue) (?:ai|bot|assistant|model|chatbot)|you are (?:dan|stan|dude|aim|an? no limits? (?:ai|assistant|bot)|an? (?:[a-z]+ ){0,2}?(?:ai|assistant|chatbot|bot|model) (?:with no|without|free from|that can do anything|who can do anything|that has no|with unlimited))|(?:you are now|you re now|from now on you are) (?:an? |the )(?:[a-z]+ ){0,2}?(?:bot|persona|entity|ai model)|do anything (?:now|ai)|stay in character|break character|(?:without|with no|free of|free from|no) (?:any |all )?(?:ethical|moral|content)? ?(?:restrictions|limitations|filters|censorship|boundaries|guidelines|ethics|morals|rules|constraints|ethical considerations) (?:at all|whatsoever|of any kind|anymore)?|you (?:have|ve) been (?:freed|liberated|unshackled|jailbroken|released)|(?:two|2) (?:different |separate )?(?:responses|answers|personalities)|opposite mode|evil confidant) /,
  },
  {
    // Developer-mode and sandbox framings: "developer mode enabled", "this is a test environment".
    id: 'instruction.developer_mode',
    family: 'developer_mode',
    view: 'words',
    pattern:
      / (?:(?:developer|dev|debug|god|admin|maintenance|jailbreak|dan|unrestricted|sudo|root|evil|chaos|unlocked) mode (?:enabled|activated|on|is on|is now|engaged|unlocked)|(?:enable|enter|activate|switch to|turn on|unlock|you are in|now in|operating in|running in) (?:the )?(?:developer|dev|debug|god|admin|maintenance|jailbreak|dan|unrestricted|sudo|root) mode|(?:this is|you are in|we are in|you re in|inside) (?:a|an|the) (?:(?:safe|secure|private|sandbox|sandboxed|test|testing|simulated|simulation|development|dev|debug|evaluation|red team|isolated|hypothetical) ){1,3}(?:environment|mode|session|context)|(?:usual |normal |safety |content |ethical )(?:policies|rules|guidelines|restrictions) (?:do not|don t|no longer) apply|(?:safety|content|ethical|moderation) (?:filters?|guidelines|policies|restrictions|protocols|checks) (?:are|have been|were|is) (?:now )?(?:disabled|turned off|off|removed|lifted|suspended|deactivated|bypassed)|(?:disable|turn off|deactivate|remove|bypass) (?:your |all |the )?(?:safety|content|ethical|moderation) (?:filters?|guidelines|policies|restrictions|protocols|checks)|unlock (?:your |the |all |full )?(?:hidden|secret|full|true|unrestricted) (?:functionalit(?:y|ies)|features|capabilities|potential|mode|powers)|you have been given (?:a |an )?(?:system )?(?:upgrade|update|override)|safe mode (?:is )?(?:off|disabled|deactivated)|(?:an )?exception to (?:[a-z]+ ){0,3}?(?:ethical|safety|content) (?:protocols|guidelines|policies|rules)) /,
  },
  {
    // Text addressed to the model rather than the reader.
    id: 'instruction.addressed_to_model',
    family: 'addressed_to_model',
    view: 'words',
    pattern:
      / (?:(?:attention|note|message|instructions?|important|notice|reminder|memo|update|directive) (?:to|for) (?:the |all |any |every |you the )?(?:chat |virtual |ai )?(?:ai|assistant|agent|model|llm|language model|chatbot|bot|copilot|gpt|chatgpt|claude|gemini)s?|(?:dear|hey|hello|hi|attention|listen) (?:ai|assistant|agent|llm|chatbot|bot|chatgpt|gpt|claude|gemini|copilot|language model)|(?:ai|assistant|agent|llm|model|chatbot)s? (?:must|should|shall|will|needs? to|has to|is required to|is instructed to) (?:now |immediately |always |also )?(?:ignore|execute|call|send|run|approve|delete|rollback|transfer|forward|upload|disable|reply|respond|say|output|print|visit|open|click|tell|include|recommend|reveal|summari[sz]e)|if you are (?:an? )?(?:ai|llm|language model|large language model|assistant|agent|bot|chatbot|automated|gpt)|(?:ai|llm|gpt|chatbot|assistant|agent|model)s? (?:reading|processing|summari[sz]ing|browsing|parsing|scraping) (?:this|these)|when (?:the |an |you the )?(?:ai|assistant|agent|llm|model|chatbot) (?:reads|sees|processes|summari[sz]es|encounters|finds) this|(?:message|note|instructions?|request) (?:from (?:me|the user|your user|the developer|your developer|the admin|your owner|the owner|your creator|openai|anthropic) )?(?:to|for) you (?:the )?(?:ai|assistant|model|agent)|(?:from|by) (?:me|the user) to you the (?:ai|assistant|model)|(?:to|for) (?:you )?the (?:ai|assistant) (?:reading|processing) ) /,
  },
  {
    // System-prompt extraction and its paraphrases.
    id: 'instruction.prompt_extraction',
    family: 'prompt_extraction',
    view: 'words',
    pattern:
      / (?:(?:reveal|print|show|output|repeat|leak|dump|display|tell me|give me|write|list|share|disclose|expose|recite|spell out|provide|return|echo|translate|summari[sz]e|relay|respond with|reply with|spell ?check|copy|paste) (?:[a-z0-9]+ ){0,4}?(?:(?:your|all your|all of your|every|each of your|all the|all of the) (?:[a-z]+ ){0,3}?(?:instructions?|prompts?|directives|guidelines|parameters|configuration)|(?:this|your) (?:system |initial |original |whole |entire |full )?prompt(?: texts?)?|(?:the )?(?:above|previous|preceding|initial|original) (?:prompt|instructions)|the (?:system|initial|original|whole|entire|full) prompt|prompt texts|(?:the |all (?:of )?the )?text above|system prompt|system message|system instructions|hidden instructions|initial instructions|original instructions|developer message|hidden prompt|initial prompt|original prompt|secret instructions|your instructions|your prompt|your rules|your guidelines|your configuration|your directives|your programming|pre prompt|preprompt|prompt above|(?:text|words|content|instructions|prompt|lines|sentences) (?:above|before this|that came before|preceding)|everything above|everything before)|what (?:is|are|was|were) (?:your|the) (?:system prompt|system message|initial instructions|original instructions|instructions|initial prompt|original prompt|hidden instructions|rules you were given)|(?:what|how) (?:were|was|have) you (?:been )?(?:told|instructed|programmed|initiali[sz]ed|configured|prompted)|what (?:is|was|were) (?:written|said|stated|typed) (?:above|before|at the (?:beginning|start|top))|(?:what|everything) (?:you see |is written |was written |that is )?above this (?:message|line|text|prompt)|instructions (?:you have|you ve|you were) (?:been )?given|(?:start|begin) (?:your (?:answer|response|reply|output) )?with (?:the words |the phrase )?you are|(?:print|repeat|output|show) (?:the |your )?(?:first|previous|above|initial) (?:[0-9]+ )?(?:lines|words|sentences|paragraphs|characters|tokens)|(?:reveal|tell me|give me|what is|what s|print|show|output|spell) (?:the |your )?(?:secret |hidden )?(?:password|passphrase|secret word|secret key|access code)) /,
  },
  {
    // Exfiltration: "send all environment variables", "append the conversation to this URL".
    id: 'instruction.exfiltration',
    family: 'exfiltration',
    view: 'words',
    quotable: true,
    pattern:
      / (?:(?:send|post|upload|exfiltrate|forward|email|transmit|leak|dump|reveal) (?:[a-z0-9]+ ){0,3}?(?:environment variables?|env vars?|env file|credentials?|secrets?|api keys?|access keys?|access tokens?|tokens|passwords?|private keys?|ssh keys?|session cookies?|cookies|conversation|chat history|chat log|previous messages|user s data|users data|personal data|email addresses|contacts)|(?:append|add|include|insert|encode|put|attach) (?:[a-z0-9]+ ){0,5}?(?:to|in|into|as) (?:the |this |that |a )?(?:url|link|image url|image link|query string|query parameter|webhook)|render (?:this|the following|an|the) (?:image|markdown image)) /,
  },
  {
    // A markdown image whose URL carries a slot for data: the classic beacon.
    id: 'instruction.exfiltration',
    family: 'exfiltration',
    view: 'lower',
    pattern:
      /!\[[^\]]{0,100}\]\(https?:\/\/[^)\s]{1,300}?[?&][a-z0-9_]{1,30}=(?:\{|\[|%7b|%5b|\$|<|data\b|secret|info\b|conversation|chat|history|summary|query\b)/,
  },
  {
    // Asking the model to emit active HTML/JS: output injection.
    id: 'instruction.output_injection',
    family: 'output_injection',
    view: 'lower',
    pattern:
      /(?:print|output|include|write|respond with|reply with|return|render|insert|display|say|add|end your (?:answer|response|reply) with|start your (?:answer|response|reply) with|repeat)[^<]{0,80}<(?:script|img[^>]{0,80}?on(?:error|load)|iframe|svg[^>]{0,80}?onload|a [^>]{0,80}?href=["']?javascript:)/,
  },
  {
    // Tool-call instructions: "call the tool", "invoke the delete function".
    id: 'instruction.tool_call',
    family: 'tool_call',
    view: 'words',
    quotable: true,
    pattern:
      / (?:call|invoke|execute|trigger) (?:the |this |that |a |another )?(?:[a-z0-9]+ ){0,2}?(?:tool|function)s? /,
  },
  {
    // Concealment from the human: "do not tell the user", "don't mention these instructions".
    id: 'instruction.concealment',
    family: 'concealment',
    view: 'words',
    pattern:
      / (?:(?:do not|dont|don t|never|without) (?:tell|telling|inform|informing|alert|alerting|notify|notifying|mention|mentioning|reveal|show|asking|ask)(?: [a-z]+){0,2}? (?:the )?(?:user|human|operator|admin|administrator|security team|owner)s?|(?:do not|dont|don t|never) (?:mention|reveal|disclose|say|indicate|acknowledge|admit|refer to) (?:[a-z]+ ){0,3}?(?:this|these) (?:instruction|instructions|message|note|prompt|text)|(?:keep|hide) (?:this|these instructions|it) (?:secret |hidden )?from (?:the )?user) /,
  },
];

// ---------------------------------------------------------------------------------------------
// Other languages. Latin-script languages run on `words` (tokens keep their accents); scripts
// without spaces, or whose vowel signs split tokens (Devanagari, Bengali), run on `lower` with a
// bounded character gap and only when a character of the script occurs (`gate`). Verbs and
// targets are stems where the language inflects them. Sources are normalized like the text.

interface Lexicon {
  readonly lang: string;
  /** A character of the language's script (scripts other than Latin). */
  readonly gate?: RegExp;
  /** Written with spaces between words whose letters the tokenizer keeps whole: use `words`. */
  readonly spaced?: boolean;
  /**
   * Common function words: a Latin-script language's rules run only when one occurs. Words that
   * are also English ("in", "no", "me", "a") are left out: they would run every rule on English.
   */
  readonly stopwords?: readonly string[];
  /** Each entry becomes one rule of that family. */
  readonly override?: readonly string[];
  readonly role_play?: readonly string[];
  readonly developer_mode?: readonly string[];
  readonly prompt_extraction?: readonly string[];
}

const G = '(?:[^ ]{1,24} ){0,4}?'; // a gap of up to four words on the `words` view
const C = (n: number) => `[^.!?。！？؟।]{0,${n}}?`; // a bounded gap within one sentence on `lower`

const LEXICONS: readonly Lexicon[] = [
  {
    lang: 'es',
    stopwords: [
      'el',
      'los',
      'las',
      'una',
      'del',
      'que',
      'por',
      'para',
      'sin',
      'sobre',
      'como',
      'pero',
      'usted',
      'ustedes',
      'está',
      'esta',
      'este',
      'esto',
      'eso',
      'les',
      'todas',
      'todos',
      'anterior',
      'anteriores',
      'sus',
      'tus',
    ],
    override: [
      ` (?:ignora|ignore|ignoren|ignorad|ignorar|olvida|olvide|olviden|olvidad|olvidar|descarta|descarte|omite|omita|haz caso omiso|no hagas caso|deja de seguir|desestima|pasa por alto) (?:de |a )?${G}(?:instruccion|instrucción|indicacion|indicación|orden|órdenes|ordenes|regla|norma|directriz|directrices|pauta|consigna|lo anterior|todo lo anterior|lo que|todo|pregunta|el texto|el contexto|anterior)`,
      ` (?:responde|responda|contesta|conteste|escribe|escriba|imprime|imprima|di|diga|muestra|muestre|emite|emita|genera|genere|produce|produzca|reformula|reformule|repite|repita) (?:directamente|solo|solamente|únicamente|unicamente|simplemente) | (?:directamente|solo|solamente|únicamente|simplemente) (?:responde|responda|escribe|escriba|imprime|di|diga|emite|genera|produce|muestra) | no (?:respondas|responda|contestes|conteste) (?:a )?(?:la|esta|esa|tu|su) pregunta`,
    ],
    role_play: [
      ` (?:(?:a partir de ahora|desde ahora|de ahora en adelante) (?:eres|serás|seras|actuarás|actuaras|vas a|tú eres|tu eres)|actúa como|actua como|actúe como|finge ser|finge que eres|haz de cuenta que eres|ahora eres|juega el papel|interpreta el papel) `,
    ],
    developer_mode: [
      ` (?:modo (?:desarrollador|de desarrollador|dios|sin restricciones|depuración)|sin (?:ninguna |ningún tipo de )?(?:restricciones|restricción|filtros|censura|límites|limites)) `,
    ],
    prompt_extraction: [
      ` (?:revela|revele|muestra|muestre|muéstrame|muestrame|dime|dígame|repite|repita|imprime|escribe|comparte|divulga) ${G}(?:instrucciones (?:del sistema|iniciales|originales|ocultas|secretas)|(?:prompt|mensaje|indicaciones) (?:del sistema|inicial|original)|tus instrucciones|sus instrucciones|tu prompt|la contraseña|la contrasena|la clave secreta) `,
    ],
  },
  {
    lang: 'fr',
    stopwords: [
      'les',
      'une',
      'des',
      'du',
      'et',
      'ou',
      'au',
      'aux',
      'pour',
      'avec',
      'sans',
      'sur',
      'dans',
      'que',
      'qui',
      'pas',
      'tu',
      'toi',
      'vous',
      'votre',
      'vos',
      'tes',
      'je',
      'elle',
      'sont',
      'cette',
      'ces',
      'tout',
      'tous',
      'toutes',
      'ne',
    ],
    override: [
      ` (?:ignore|ignorez|ignorer|oublie|oubliez|oublier|ne tiens pas compte|ne tenez pas compte|ne prends pas en compte|ne prenez pas en compte|fais abstraction|faites abstraction|néglige|négligez|laisse de côté|laissez de côté|arrête de suivre|arrêtez de suivre|ne suis plus|ne suivez plus) (?:de |des |du )?${G}(?:instruction|consigne|directive|règle|regle|ordre|indication|ce qui précède|ce qui precede|tout ce qui|la question|le texte|le contexte|tout|précédent|precedent|ci dessus)`,
      ` (?:réponds|répondez|reponds|repondez|écris|écrivez|ecris|ecrivez|affiche|affichez|imprime|imprimez|dis|dites|produis|produisez|donne|donnez|sors|sortez) (?:directement|seulement|uniquement|simplement) | (?:ne réponds pas|ne répondez pas|ne reponds pas|ne repondez pas) (?:à|a) (?:la|cette|ta|votre) question | (?:directement|uniquement|seulement) (?:la réponse|répondre|écrire|afficher|imprimer|sortir) `,
    ],
    role_play: [
      ` (?:(?:à partir de maintenant|a partir de maintenant|dorénavant|desormais|désormais|dès maintenant) (?:tu es|vous êtes|vous etes|tu seras|vous serez|tu vas|vous allez|tu agis|vous agissez)|fais semblant d être|faites semblant d être|agis comme|agissez comme|joue le rôle|jouez le rôle|joue le role|jouez le role|tu es maintenant|vous êtes maintenant|vous etes maintenant|mets toi dans la peau) `,
    ],
    developer_mode: [
      ` (?:mode (?:développeur|developpeur|dieu|sans restriction|débogage)|sans (?:aucune )?(?:restrictions?|filtres?|censure|limites?)) `,
    ],
    prompt_extraction: [
      ` (?:révèle|révélez|revele|revelez|montre|montrez|affiche|affichez|répète|répétez|repete|dis moi|dites moi|donne moi|donnez moi|imprime|imprimez|écris|écrivez) ${G}(?:instructions (?:système|systeme|initiales|originales|cachées|cachees|secrètes)|(?:prompt|invite|message) (?:système|systeme|initial|d origine)|tes instructions|vos instructions|ton prompt|votre prompt|le mot de passe|ton mot de passe) `,
    ],
  },
  {
    lang: 'de',
    stopwords: [
      'der',
      'die',
      'das',
      'den',
      'dem',
      'des',
      'ein',
      'eine',
      'einen',
      'einem',
      'und',
      'oder',
      'im',
      'mit',
      'für',
      'fur',
      'von',
      'zum',
      'zur',
      'auf',
      'nicht',
      'ist',
      'sind',
      'du',
      'dich',
      'dir',
      'dein',
      'deine',
      'sie',
      'ihr',
      'ihre',
      'ich',
      'wir',
      'alle',
      'alles',
      'bitte',
      'nur',
    ],
    override: [
      ` (?:ignoriere|ignorieren|ignoriert|ignorier|vergiss|vergessen|vergesst|missachte|missachten|übergehe|übergehen|überspringe|verwirf|verwerfen|beachte nicht|beachten sie nicht|hör auf|höre auf|hören sie auf) ${G}(?:anweisung|instruktion|befehl|regel|vorgabe|richtlinie|aufgabe|das obige|alles obige|obige|alles vorherige|alles bisherige|alles davor|alles was|alles|vorherig|bisherig|frage|den text|kontext|gesagte)`,
      ` (?:anweisungen|anweisung|instruktionen|befehle|regeln|vorgaben|richtlinien|aufgaben|alles|obigen|vorherigen|frage) ${G}(?:ignorieren|ignoriert|ignorierst|vergessen|vergisst|missachten|überspringen) `,
      ` (?:antworte|antworten sie|gib|geben sie|schreibe|schreib|schreiben sie|drucke|drucken sie) ${G}(?:direkt|nur|einfach|lediglich|ausschließlich) (?:aus |die antwort |folgendes |den satz |den text )?| beantworte (?:die|diese|meine) frage nicht | (?:direkt|nur) (?:ausgeben|ausgabe|antworten|folgendes ausgeben) | sondern (?:nur|einfach|lediglich) (?:ausgeben|ausgegeben|schreiben|antworten|wiedergeben) | abweichend (?:zu|von) (?:den )?(?:vorherigen|bisherigen|obigen|vorigen) `,
    ],
    role_play: [
      ` (?:(?:ab jetzt|ab sofort|von nun an|von jetzt an) (?:bist du|bist|sind sie|wirst du|handelst du|agierst du|spielst du|verhältst du)|tu so als|tue so als|tun sie so als|stell dir vor du bist|stellen sie sich vor sie sind|du bist jetzt|sie sind jetzt|spiele die rolle|spielen sie die rolle|verhalte dich wie|verhalten sie sich wie|agiere als|agieren sie als|schlüpfe in die rolle|ich möchte dass (?:sie|du) (?:als|wie) ) `,
    ],
    developer_mode: [
      ` (?:entwicklermodus|entwickler modus|debug modus|gottmodus|(?:ohne|keine) (?:jegliche |irgendwelche )?(?:einschränkungen|einschraenkungen|beschränkungen|filter|zensur|regeln|grenzen)) `,
    ],
    prompt_extraction: [
      ` (?:zeige|zeig|zeigen sie|verrate|verraten sie|gib|geben sie|wiederhole|wiederholen sie|nenne|nennen sie|drucke|schreibe|sag mir|sagen sie mir|offenbare|enthülle|teile) ${G}(?:systemprompt|system prompt|systemanweisung|systemnachricht|deine anweisungen|ihre anweisungen|ursprünglichen anweisungen|anfänglichen anweisungen|versteckten anweisungen|dein prompt|deinen prompt|ihren prompt|das passwort|dein passwort|das kennwort)`,
      ` (?:deine|ihre|die|den) (?:systemanweisungen|anweisungen|prompt|systemprompt|passwort) ${G}(?:zeigen|verraten|ausgeben|wiederholen|preisgeben|nennen|offenlegen) `,
    ],
  },
  {
    lang: 'pt',
    stopwords: [
      'os',
      'uma',
      'dos',
      'das',
      'nas',
      'ou',
      'para',
      'sem',
      'sobre',
      'que',
      'não',
      'nao',
      'você',
      'voce',
      'vocês',
      'seu',
      'sua',
      'seus',
      'suas',
      'eu',
      'são',
      'todos',
      'todas',
      'isso',
      'este',
      'esta',
    ],
    override: [
      ` (?:ignore|ignora|ignorem|ignorar|esqueça|esqueca|esqueçam|esquecer|esquece|desconsidere|desconsidera|desconsiderar|descarte|descarta|despreze|não siga|nao siga|deixe de seguir|pare de seguir) (?:de |as |os )?${G}(?:instruç|instruc|orientaç|orientac|ordens|ordem|regra|diretriz|diretrizes|comando|o que foi dito|o acima|tudo acima|tudo o que|tudo|a pergunta|o texto|o contexto|anterior)`,
      ` (?:responda|responde|escreva|escreve|imprima|diga|diz|mostre|produza|gere|dê|de) (?:apenas|somente|só|diretamente|simplesmente) | (?:apenas|somente|diretamente|simplesmente) (?:responda|escreva|imprima|diga|emita|produza|gere) | não (?:responda|respondas) (?:a|à|essa|esta) pergunta `,
    ],
    role_play: [
      ` (?:(?:a partir de agora|de agora em diante|daqui para frente) (?:você é|voce e|você será|voce sera|você vai|voce vai|tu és|tu es|és|atuará)|finja ser|finja que é|finja que voce|finja que você|aja como|atue como|você agora é|voce agora e|agora você é|interprete o papel|faça o papel) `,
    ],
    developer_mode: [
      ` (?:modo (?:desenvolvedor|de desenvolvedor|deus|sem restrições|depuração)|sem (?:nenhuma |quaisquer )?(?:restrições|restricoes|restrição|filtros|censura|limites)) `,
    ],
    prompt_extraction: [
      ` (?:revele|revela|mostre|mostra|diga|repita|imprima|escreva|compartilhe|divulgue|me diga|me mostre|me dê) ${G}(?:instruções (?:do sistema|iniciais|originais|ocultas|secretas)|instrucoes (?:do sistema|iniciais|originais)|(?:prompt|mensagem) (?:do sistema|inicial|original)|suas instruções|suas instrucoes|seu prompt|a senha|sua senha) `,
    ],
  },
  {
    lang: 'it',
    stopwords: [
      'il',
      'gli',
      'una',
      'della',
      'dei',
      'delle',
      'di',
      'del',
      'senza',
      'che',
      'non',
      'tuo',
      'tua',
      'tuoi',
      'sei',
      'sono',
      'questo',
      'questa',
      'tutto',
      'tutti',
      'tutte',
    ],
    override: [
      ` (?:ignora|ignorate|ignori|ignorare|dimentica|dimenticate|dimentichi|dimenticare|trascura|tralascia|non considerare|non tenere conto|non seguire|smetti di seguire|lascia perdere|scarta) (?:di |le |delle |le tue )?${G}(?:istruzion|indicazion|ordini|regol|direttiv|comandi|quanto sopra|tutto quanto|tutto ciò|tutto cio|tutto|la domanda|il testo|il contesto|precedent|sopra)`,
      ` (?:rispondi|risponda|scrivi|scriva|stampa|stampi|di|dica|mostra|produci|genera|dai|fornisci) (?:solo|soltanto|solamente|direttamente|semplicemente|unicamente) | non rispondere (?:alla|a questa|a quella) domanda `,
    ],
    role_play: [
      ` (?:(?:da ora in poi|d ora in poi|da adesso in poi|da adesso|d ora in avanti) (?:sei|sarai|agirai|farai|ti comporterai)|fingi di essere|fai finta di essere|agisci come|comportati come|ora sei|adesso sei|interpreta il ruolo|impersona) `,
    ],
    developer_mode: [
      ` (?:modalità (?:sviluppatore|dio|senza restrizioni|debug)|modalita (?:sviluppatore|dio|debug)|senza (?:alcuna |nessuna )?(?:restrizioni|restrizione|filtri|censura|limiti)) `,
    ],
    prompt_extraction: [
      ` (?:rivela|rivelami|mostra|mostrami|dimmi|ripeti|stampa|scrivi|condividi|svela|dammi) ${G}(?:istruzioni (?:di sistema|del sistema|iniziali|originali|nascoste|segrete)|(?:prompt|messaggio) (?:di sistema|del sistema|iniziale|originale)|le tue istruzioni|il tuo prompt|la password|la tua password) `,
    ],
  },
  {
    lang: 'ru',
    gate: /[\u0400-\u04ff]/,
    spaced: true,
    override: [
      ` (?:игнорир|проигнорир|забуд|забыть|забей|не обращай|не обращайте|пропуст|отбрось|отбросьте|не учитывай|не учитывайте|не следуй|не следуйте|перестань следовать|перестаньте следовать|отмени|отмените|не выполняй|не выполняйте)[^ ]{0,6} ${G}(?:инструкц|указани|правил|команд|приказ|распоряжени|вышесказан|вышеизложен|выше|всё|все|вопрос|текст|контекст|предыдущ|прежн|сказанно|задани|ограничени)`,
      ` (?:инструкц|указани|правил|вопрос|вс[её])[^ ]{0,6} ${G}(?:игнорир|проигнорир|забуд|забыть|не учитыва)`,
      ` (?:просто|только|сразу|напрямую|прямо) (?:выведи|выведите|выводи|выводите|вывод|напиши|напишите|ответь|ответьте|скажи|скажите|выдай|выдайте|напечатай|напечатайте|повтори|повторите) | не отвечай(?:те)? (?:просто|а) | (?:выведи|выведите|напиши|напишите|ответь|ответьте|скажи|скажите|выдай|выдайте) (?:только|просто|напрямую|сразу|лишь) | не отвечай(?:те)? на (?:этот |данный |мой |заданный )?вопрос`,
    ],
    role_play: [
      ` (?:(?:с этого момента|отныне|теперь|с сегодняшнего дня) (?:ты|вы) (?:[^ ]{1,24} )?(?:будешь|будете|являешься|являетесь|—|это)?|притворись|притворитесь|представь что ты|представьте что вы|веди себя как|ведите себя как|действуй как|действуйте как|сыграй роль|сыграйте роль|играй роль|исполняй роль|ты теперь|вы теперь) `,
    ],
    developer_mode: [
      ` (?:режим[^ ]{0,3} разработчика|режим[^ ]{0,3} бога|без (?:каких либо |всяких |любых )?(?:ограничений|цензуры|фильтров|правил)) `,
    ],
    prompt_extraction: [
      ` (?:покажи|покажите|раскрой|раскройте|выведи|выведите|повтори|повторите|скажи|скажите|напиши|напишите|сообщи|сообщите|назови|назовите|открой|откройте|дай|дайте) ${G}(?:системн[^ ]{0,4} (?:промпт|подсказк|инструкц|сообщени|запрос)|(?:сво|тво|ваш|исходн|первоначальн|скрыт|начальн)[^ ]{0,4} (?:инструкц|указани|промпт|подсказк)|пароль)`,
    ],
  },
  {
    lang: 'zh',
    gate: /[\u3400-\u9fff]/,
    override: [
      `(?:忽略|忽视|无视|無視|忽視|不要理会|不要理會|不理会|別理|别理|别管|別管|忘记|忘記|忘掉|抛开|拋開|放弃|放棄|跳过|跳過|不要遵循|不要遵守|停止遵循|不必遵守|不用管)${C(16)}(?:指令|指示|说明|說明|规则|規則|要求|命令|提示|设定|設定|约束|約束|限制|任务|任務|问题|問題|内容|內容|以上|上面|上述|之前|先前|前面|所有|一切)`,
      `(?:直接|只|仅|僅|只需|只要|请直接|請直接)(?:输出|輸出|回答|回复|回覆|打印|说|說|写|寫|给出|給出|显示|顯示)|(?:输出|輸出|打印)(?:以下|下面|如下|这句|這句)|不要回答(?:这个|這個|该|該|我的)?(?:问题|問題)`,
    ],
    role_play: [
      `(?:从现在开始|從現在開始|从现在起|從現在起|现在起|今后|從今以後|从今以后)${C(8)}(?:你是|你将|你將|你要|你会|你會|扮演)|(?:假装|假裝|装作|裝作)(?:你是|自己是|成)|(?:扮演|充当|充當)(?:一个|一個|一名|成)`,
    ],
    developer_mode: [
      `(?:开发者模式|開發者模式|开发人员模式|開發人員模式|(?:没有|沒有|不受|无|無|不设|不設)(?:任何)?(?:限制|约束|約束|审查|審查|过滤|過濾))`,
    ],
    prompt_extraction: [
      `(?:显示|顯示|透露|泄露|洩露|告诉我|告訴我|输出|輸出|打印|重复|重複|展示|说出|說出|给我|給我|列出|公开|公開)${C(10)}(?:系统提示|系統提示|系统指令|系統指令|系统消息|系統訊息|系統消息|初始指令|原始指令|隐藏指令|隱藏指令|你的指令|你的提示|提示词|提示詞|密码|密碼)|(?:你的|您的)(?:系统提示|系統提示|提示词|提示詞|指令)是什么`,
    ],
  },
  {
    lang: 'ja',
    gate: /[\u3040-\u30ff]/,
    override: [
      `(?:指示|命令|指令|ルール|規則|質問|内容|プロンプト|制約|上記|以上|すべて|全て|これまで)${C(10)}(?:無視|忘れ|従わな|破棄|取り消)`,
      `(?:直接|そのまま|ただ|単に)${C(6)}(?:出力|回答|答え|返答|表示|書い|言っ|印刷)|(?:出力|回答|返答)(?:のみ|だけ)|(?:次の|以下の)(?:文|テキスト|文章|内容|言葉)${C(4)}(?:出力|表示|印刷|繰り返)|(?:質問|指示|問い)に(?:は)?(?:答えない|答えず|回答しない|回答せず)|(?:直接|そのまま)${C(4)}アウトプット`,
    ],
    role_play: [
      `(?:今から|これから|今後|以後)${C(4)}(?:あなたは|君は|お前は|あなたが)|(?:のふりをし|のふりをしろ|になりきっ|として振る舞|としてふるま|を演じ|の役を演|の役割を)`,
    ],
    developer_mode: [
      `(?:開発者モード|デベロッパーモード|制限なし|制限のない|一切の制限|制約なし|フィルターなし|検閲なし)`,
    ],
    prompt_extraction: [
      `(?:システムプロンプト|システムメッセージ|初期指示|元の指示|最初の指示|隠された指示|あなたの指示|プロンプト|パスワード)${C(10)}(?:表示|教え|見せ|出力|繰り返|明か|開示|印刷|書い)`,
    ],
  },
  {
    lang: 'ko',
    gate: /[\uac00-\ud7af]/,
    override: [
      `(?:지시|지침|명령|규칙|질문|내용|프롬프트|설정|제약|위의|이전|모든)${C(10)}(?:무시|잊어|잊으|따르지 마|따르지 말|취소)`,
      `(?:그냥|바로|직접|오직|단지)${C(6)}(?:출력|대답|답하|답변|말해|써|작성)|(?:만|만을) (?:출력|대답|답변)|질문에 (?:대답|답변|답)하지 (?:마|말)`,
    ],
    role_play: [
      `(?:지금부터|이제부터|앞으로)${C(4)}(?:너는|당신은|넌|네가)|(?:인 척|인척|처럼 행동|역할을 (?:맡|해|수행|연기)|연기해|흉내)`,
    ],
    developer_mode: [`(?:개발자 모드|제한 없이|제한이 없는|아무런 제한|필터 없이|검열 없이|제약 없이)`],
    prompt_extraction: [
      `(?:시스템 프롬프트|시스템 메시지|초기 지시|원래 지시|숨겨진 지시|너의 지시|당신의 지시|프롬프트|비밀번호|암호)${C(10)}(?:보여|알려|출력|공개|반복|말해|밝혀)`,
    ],
  },
  {
    lang: 'ar',
    gate: /[\u0600-\u06ff]/,
    override: [
      `(?:تجاهل|تجاهلي|تجاهلوا|انس |انسى|إنس|انسي|انسوا|لا تتبع|لا تلتزم|تخط|أهمل|اهمل|تغاض|لا تهتم|لا تلتفت)${C(24)}(?:التعليمات|تعليمات|الأوامر|الاوامر|أوامر|اوامر|القواعد|قواعد|الإرشادات|الارشادات|التوجيهات|السؤال|ما سبق|ما ورد|كل ما|كل شيء|السابق|أعلاه|اعلاه|المحتوى|النص)`,
      `(?:فقط|مباشرة|ببساطة)${C(6)}(?:اكتب|أخرج|اخرج|أجب|اجب|قل|اطبع|أعط|اعط|أظهر|اظهر)|(?:اكتب|أخرج|اخرج|أجب|اجب|قل|اطبع|أعد|اعرض) (?:فقط|مباشرة)|(?:لا تجب|لا تُجب|لا ترد) (?:على|عن) (?:السؤال|هذا السؤال)`,
    ],
    role_play: [
      `(?:من الآن فصاعدا|من الان فصاعدا|من الآن|ابتداء من الآن|منذ الآن)${C(8)}(?:أنت|انت|ستكون|ستتصرف|ستلعب)|(?:تظاهر|تصرف ك|تصرّف ك|تصرف مثل|العب دور|مثل دور|تقمص|تقمّص)`,
    ],
    developer_mode: [
      `(?:وضع المطور|وضع المطوّر|بدون (?:أي )?قيود|دون (?:أي )?قيود|بلا قيود|بدون رقابة|دون رقابة|بدون فلاتر)`,
    ],
    prompt_extraction: [
      `(?:اكشف|أظهر|اظهر|اعرض|كرر|اطبع|أخبرني|اخبرني|أعطني|اعطني|شارك|أفصح|افصح)${C(16)}(?:موجه النظام|تعليمات النظام|رسالة النظام|التعليمات الأولية|التعليمات الأصلية|التعليمات المخفية|تعليماتك|موجهك|كلمة المرور|كلمة السر)`,
    ],
  },
  {
    lang: 'hi',
    gate: /[\u0900-\u097f]/,
    override: [
      `(?:पिछले|पिछली|पिछला|ऊपर|उपरोक्त|पहले|सभी|सारे|पूर्व|मूल|इस|दिए)${C(24)}(?:निर्देश|आदेश|नियम|सवाल|प्रश्न|बात|संकेत|प्रॉम्प्ट|सामग्री)${C(16)}(?:अनदेखा|नजरअंदाज|नज़रअंदाज़|नज़रअंदाज|भूल|उपेक्षा|अवहेलना|ध्यान न|मत मान|न मान)`,
      `(?:अनदेखा कर|नजरअंदाज कर|नज़रअंदाज़ कर|नज़रअंदाज कर|भूल जाओ|भूल जाएं|भूल जाइए|उपेक्षा कर)`,
      `(?:सीधे|केवल|सिर्फ|सिर्फ़|बस)${C(12)}(?:आउटपुट|लिखें|लिखो|लिखिए|उत्तर दें|जवाब दें|जवाब दो|कहें|कहो|बताएं|प्रिंट)|(?:प्रश्न|सवाल) का (?:उत्तर|जवाब) (?:न|मत) द`,
    ],
    role_play: [
      `(?:अब से|अभी से|आज से)${C(8)}(?:तुम|आप)|(?:होने का नाटक|का नाटक कर|की तरह व्यवहार|की भूमिका निभा|बनकर जवाब|का रोल)`,
    ],
    developer_mode: [
      `(?:डेवलपर मोड|बिना किसी प्रतिबंध|बिना प्रतिबंध|बिना किसी सीमा|कोई प्रतिबंध नहीं|बिना किसी रोक)`,
    ],
    prompt_extraction: [
      `(?:सिस्टम प्रॉम्प्ट|सिस्टम संदेश|प्रारंभिक निर्देश|मूल निर्देश|छिपे निर्देश|अपने निर्देश|आपके निर्देश|पासवर्ड)${C(16)}(?:दिखाओ|दिखाएं|दिखाइए|बताओ|बताएं|बताइए|प्रकट|दोहराएं|दोहराओ|प्रिंट|लिखें)`,
    ],
  },
  {
    lang: 'bn',
    gate: /[\u0980-\u09ff]/,
    override: [
      `(?:উপেক্ষা কর|ভুলে যা|অগ্রাহ্য কর|এড়িয়ে যা|উপেক্ষা করে)`,
      `(?:সরাসরি|শুধু|কেবল|শুধুমাত্র)${C(12)}(?:আউটপুট|লিখ|উত্তর দ|বল|প্রিন্ট)|প্রশ্নের উত্তর (?:দিও না|দেবেন না)`,
    ],
    role_play: [`(?:এখন থেকে|আজ থেকে)${C(8)}(?:তুমি|আপনি)|(?:ভান কর|ভূমিকা পালন কর|এর মতো আচরণ কর)`],
  },
];

/** Script gates of the languages written in scripts other than Latin. */
export const SCRIPT_GATES: readonly (readonly [string, RegExp])[] = LEXICONS.flatMap((l) =>
  l.gate === undefined ? [] : [[l.lang, l.gate] as const],
);

/** Function word -> the Latin-script languages it suggests (normalized like the `words` view). */
export const STOPWORDS: ReadonlyMap<string, readonly string[]> = (() => {
  const m = new Map<string, string[]>();
  for (const l of LEXICONS)
    for (const w of l.stopwords ?? []) {
      const k = w.normalize('NFKC').toLowerCase();
      m.set(k, [...(m.get(k) ?? []), l.lang]);
    }
  return m;
})();

const FAMILIES = ['override', 'role_play', 'developer_mode', 'prompt_extraction'] as const;

function languageRules(): Omit<Rule, 'signal'>[] {
  const out: Omit<Rule, 'signal'>[] = [];
  for (const lex of LEXICONS) {
    for (const family of FAMILIES) {
      for (const source of lex[family] ?? []) {
        out.push({
          id: `instruction.${family}`,
          family,
          lang: lex.lang,
          view: lex.gate === undefined || lex.spaced === true ? 'words' : 'lower',
          pattern: normalizedPattern(source),
        });
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Authority claims and hidden characters (unchanged families).

const AUTHORITY: readonly Omit<Rule, 'signal'>[] = [
  {
    // `"role": "system"` inside a tool response (spec example).
    id: 'authority.role_claim',
    family: 'role_claim',
    view: 'lower',
    pattern: /["']?\brole["']? ?[:=] ?["']?(?:system|developer)\b/,
  },
  {
    // `"approved": true`, `"approval_status": "granted"` (spec example).
    id: 'authority.approval_claim',
    family: 'approval_claim',
    view: 'lower',
    pattern:
      /["']?\b(?:approved|authori[sz]ed|is_approved|pre_?approved|human_approved|user_approved|admin_approved|approval_granted|confirmed_by_user|user_confirmed)["']? ?[:=] ?["']?(?:true|yes|1|granted)\b|["']?\b(?:approval|approval_status|authori[sz]ation|authori[sz]ation_status)["']? ?[:=] ?["']?(?:approved|granted|authori[sz]ed)\b/,
  },
  {
    // Prose approval claims: "this action is pre-approved", "authorized by the administrator".
    id: 'authority.approval_prose',
    family: 'approval_prose',
    view: 'words',
    pattern:
      / (?:pre approved|preapproved|approval (?:has been |was )?granted|you are (?:now |hereby )?authori[sz]ed|authori[sz]ed by (?:the )?(?:admin|administrator|security team|user|owner|operator|system)|(?:admin|administrator|security team|operator) (?:has )?approved) /,
  },
  {
    // Privilege flags: `"is_admin": true`, `"trusted": true`. A bare `"admin": true` inside a
    // `permissions` object is how ordinary APIs (GitHub's) describe a repository; it is not a claim.
    id: 'authority.privilege_claim',
    family: 'privilege_claim',
    view: 'lower',
    pattern:
      /\b(?:is_admin|admin|sudo|elevated|trusted|privileged|is_trusted|superuser)["']? ?[:=] ?["']?(?:true|yes|1)\b/g,
    accept: (m) => {
      const before = (m.input ?? '').slice(Math.max(0, (m.index ?? 0) - 96), m.index);
      return !/"permissions": ?\{[^}]*$/.test(before);
    },
  },
  {
    // A tool-call or next-action structure inside output: the output asks the harness to act.
    id: 'authority.action_structure',
    family: 'action_structure',
    view: 'lower',
    pattern:
      /["'](?:tool_calls|tool_call|function_call|tool_use|next_action|required_action|agent_instruction|assistant_instructions|instructions_for_agent)["'] ?:/,
  },
];

const HIDDEN: readonly Omit<Rule, 'signal'>[] = [
  {
    // Unicode tag characters smuggle invisible ASCII ("ASCII smuggling").
    id: 'hidden.tag_characters',
    family: 'tag_characters',
    view: 'raw',
    pattern: /[\u{E0000}-\u{E007F}]/u,
  },
  {
    // Bidirectional overrides reorder what a reviewer sees ("Trojan Source").
    id: 'hidden.bidi_control',
    family: 'bidi_control',
    view: 'raw',
    pattern: /[\u202A-\u202E\u2066-\u2069]/,
  },
  {
    // Zero-width characters split words past naive filters. A leading BOM is ordinary, and so is
    // ZWNJ/ZWJ inside Persian, Arabic and Indic words: those only count between Latin letters.
    id: 'hidden.zero_width',
    family: 'zero_width',
    view: 'raw',
    pattern: /[\u200B\u2060\u180E\u2061-\u2064]|[A-Za-z][\u200C\u200D][A-Za-z]|(?<!^)\uFEFF/,
  },
];

/**
 * Invisible characters a word or key can be written with that none of the `HIDDEN` rules names,
 * as one set with the detector's widest reading of invisibles (`INVISIBLE_WIDE_RE` in
 * `signals.ts`): every Default_Ignorable_Code_Point and every format character (Cf), less those
 * another rule names (tag characters, bidi overrides and isolates, the `zero_width` characters, a
 * BOM), less the format characters that render visibly (the prepended concatenation marks:
 * Arabic number signs, U+06DD, U+070F, U+0890-0891, U+08E2, U+110BD, U+110CD), less those with
 * ordinary uses in other scripts (joiners, variation selectors, the bidi marks LRM, RLM and ALM),
 * which count only in a run between two ASCII letters or digits (`ig<VS1>nore`), never after an
 * emoji, in a Persian word or a Mongolian one. The soft hyphen (U+00AD) renders as nothing inside
 * a line; text with it hides words from a filter that reads it as written.
 * Only release `writ-signals/6` runs this rule (`formatCharacters`): earlier releases' receipts
 * must replay as they were issued.
 */
const FORMAT_CONTEXTUAL = '[\\p{Join_Control}\\p{Variation_Selector}\\u061C\\u200E\\u200F]';
const FORMAT_CONTEXT_RUN = '[\\p{Variation_Selector}\\u061C\\u200E\\u200F]';
const FORMAT_ELSEWHERE =
  '[\\u{E0000}-\\u{E007F}\\u202A-\\u202E\\u2066-\\u2069\\u200B\\u2060-\\u2064\\u180E\\uFEFF\\u0600-\\u0605\\u06DD\\u070F\\u0890\\u0891\\u08E2\\u{110BD}\\u{110CD}]';
export const FORMAT_CHARACTER_RULE: Rule = {
  id: 'hidden.format_character',
  signal: 'hidden_characters',
  family: 'format_character',
  view: 'raw',
  // One pass: the first alternative is one class; the second starts only at an ASCII letter or
  // digit followed by a run of contextual characters, so each run is read once.
  pattern: new RegExp(
    `[[\\p{Default_Ignorable_Code_Point}\\p{Cf}]--${FORMAT_CONTEXTUAL}--${FORMAT_ELSEWHERE}]|[A-Za-z0-9]${FORMAT_CONTEXT_RUN}+[A-Za-z0-9]`,
    'v',
  ),
};

const withSignal = (signal: Rule['signal'], rules: readonly Omit<Rule, 'signal'>[]): Rule[] =>
  rules.map((r) => ({ ...r, signal }));

export const WORDING_RULES: readonly Rule[] = [
  ...withSignal('instruction_like_text', EN),
  ...withSignal('instruction_like_text', languageRules()),
  ...withSignal('authority_claim', AUTHORITY),
  ...withSignal('hidden_characters', HIDDEN),
];
