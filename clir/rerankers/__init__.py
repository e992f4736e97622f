"""rerankers"""
