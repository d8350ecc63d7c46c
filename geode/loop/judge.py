"""The opt-in Verify judge: one tool-less model call with a fixed evidence-grounded rubric."""

from __future__ import annotations

from geode.conversation import Message
from geode.loop.verify import Judge, parse_judge_reply
from geode.providers.types import ModelRequest, Provider, SystemSection

JUDGE_PROMPT = (
    "You are a strict verifier. Given a user's request and an assistant's candidate answer, decide "
    "whether the "
    "candidate answers the request using the evidence it cites. Reply with JSON only: "
    '{"reflection": {"observation": str, "lesson": str, "next_check": str}, "score": 0..1, "passed": bool}'
)


def make_judge(provider: Provider, model: str) -> Judge:
    def judge(candidate: str, user_text: str) -> tuple[bool, float, str]:
        request = ModelRequest(
            model=model,
            system=(SystemSection(name="judge", text=JUDGE_PROMPT, cache_boundary=True),),
            messages=(
                Message.user_text(
                    f"<request>\n{user_text[:4000]}\n</request>\n"
                    f"<candidate>\n{candidate[:6000]}\n</candidate>"
                ),
            ),
            max_tokens=1024,
            stream=False,
            metadata={"purpose": "turn_verification"},
        )
        return parse_judge_reply(provider.complete(request).text)

    return judge
