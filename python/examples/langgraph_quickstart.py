"""LangGraph's quickstart with LazarusSaver in SqliteSaver's place (docs/python.md): a graph
with memory, invoked with LangGraph's default durability. The node stands in for the model."""

from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph

from lazarus.langgraph import LazarusSaver


def chatbot(state: MessagesState):
    heard = [m.content for m in state["messages"] if m.type == "human"]
    return {"messages": [AIMessage(content=f"You said: {' / '.join(heard)}")]}


builder = StateGraph(MessagesState)
builder.add_node("chatbot", chatbot)
builder.add_edge(START, "chatbot")

with LazarusSaver() as checkpointer:  # was: SqliteSaver.from_conn_string("graph.db")
    graph = builder.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "user:42/chat"}}
    graph.invoke({"messages": [{"role": "user", "content": "hi! I'm Bob"}]}, config)
    out = graph.invoke({"messages": [{"role": "user", "content": "what's my name?"}]}, config)
    print(out["messages"][-1].content)  # You said: hi! I'm Bob / what's my name?
